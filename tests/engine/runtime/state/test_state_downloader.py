"""StateDownloader (a restore's reads of a chain's files, several at a time): it changes when bytes
arrive, never which; reads run together; what it holds read ahead stays within its budget; an error
is raised where its read is asked for; and a chain restored through it at several threads gives the
same state as read one file after another. The reads here are functions over bytes in memory (the
files' readers are tested with real files and a real S3 server elsewhere)."""
from __future__ import annotations

import threading
from typing import Any

import pytest

from millstream.engine.runtime.state.state_downloader import (
    DEFAULT_THREADS,
    TRANSFER_THREADS,
    StateDownloader,
    transfer_threads,
)


class Files:
    """Files of ``size`` bytes a part; counts every read, and the bytes read and not yet asked for."""

    def __init__(self, size: int = 100, gate: threading.Barrier | None = None, fail: str | None = None) -> None:
        self.size, self.gate, self.fail = size, gate, fail
        self.reads: list[str] = []
        self.lock = threading.Lock()
        self.out = 0  # bytes returned by reads and not yet handed to the replay
        self.most_out = 0

    def read(self, name: str, ranges: list) -> Any:
        with self.lock:
            self.reads.append(name)
        if self.gate is not None:
            self.gate.wait(10)  # returns only once every party is inside a read at the same time
        if name == self.fail:
            raise OSError(f"{name}: gone")
        parts = [(kg, f"{name}/{kg}".encode().ljust(length, b".")) for kg, _, length in ranges]
        with self.lock:
            self.out += sum(len(p) for _, p in parts)
            self.most_out = max(self.most_out, self.out)
        return parts

    def taken(self, parts: Any) -> list:
        parts = list(parts)
        with self.lock:
            self.out -= sum(len(p) for _, p in parts)
        return parts


def _plan(n: int, size: int = 100) -> list[tuple[str, list]]:
    return [(f"f{i}", [(i % 3, 0, size), (i % 3 + 3, size, size)]) for i in range(n)]


def test_reads_ahead_give_the_same_parts_in_the_same_order_each_read_once() -> None:
    files = Files()
    plan = _plan(30)
    with StateDownloader(files.read, threads=4, budget=10_000) as download:
        download.plan(plan)
        got = [files.taken(download(name, ranges)) for name, ranges in plan]
    assert got == [files.read(name, ranges) for name, ranges in plan]
    assert sorted(files.reads[:30]) == sorted(name for name, _ in plan)  # each once, before the check's own reads


def test_reads_run_together() -> None:
    # four reads must be inside ``read`` at once for any of them to return
    files = Files(gate=threading.Barrier(4))
    plan = _plan(8)
    with StateDownloader(files.read, threads=4, budget=10_000) as download:
        download.plan(plan)
        got = [files.taken(download(name, ranges)) for name, ranges in plan]
    assert [p[0][1].split(b"/")[0] for p in got] == [f"f{i}".encode() for i in range(8)]


def test_one_thread_reads_as_asked_for() -> None:
    files = Files()
    plan = _plan(5)
    with StateDownloader(files.read, threads=1) as download:
        download.plan(plan)
        assert files.reads == []  # nothing ahead
        for name, ranges in plan:
            files.taken(download(name, ranges))
            assert files.reads[-1] == name


def test_what_is_held_ahead_stays_within_the_budget() -> None:
    files = Files()
    plan = _plan(40, size=1_000)  # 2,000 bytes a read
    with StateDownloader(files.read, threads=4, budget=5_000) as download:
        download.plan(plan)
        for name, ranges in plan:
            files.taken(download(name, ranges))
    assert files.most_out <= 5_000 + 2_000  # the budget, and the read being handed over


def test_a_read_bigger_than_the_budget_is_not_read_ahead_but_when_asked_for() -> None:
    files = Files()
    big = ("big", [(0, 0, 50_000)])
    with StateDownloader(files.read, threads=4, budget=10_000) as download:
        download.plan([big, *_plan(3)])
        assert "big" not in files.reads
        files.taken(download(*big))
        assert files.reads.count("big") == 1
        for name, ranges in _plan(3):
            files.taken(download(name, ranges))
    assert files.reads.count("f0") == 1


def test_a_read_asked_for_before_its_turn_is_not_read_twice() -> None:
    files = Files()
    plan = _plan(30)
    with StateDownloader(files.read, threads=2, budget=300) as download:  # one read ahead at a time
        download.plan(plan)
        files.taken(download(*plan[20]))  # out of order
        for name, ranges in plan[:20] + plan[21:]:
            files.taken(download(name, ranges))
    assert sorted(files.reads) == sorted(name for name, _ in plan)


def test_an_error_is_raised_where_its_read_is_asked_for() -> None:
    files = Files(fail="f3")
    plan = _plan(6)
    with StateDownloader(files.read, threads=4, budget=10_000) as download:
        download.plan(plan)
        for name, ranges in plan[:3]:
            files.taken(download(name, ranges))  # the files before it are whole
        with pytest.raises(OSError, match="f3: gone"):
            download(*plan[3])


def test_the_job_option_is_flinks_and_read_ahead_is_for_files_at_a_url() -> None:
    at_s3 = ["s3://bucket/ckpts/job/chk-3/op-0.state"]
    assert TRANSFER_THREADS == "state.backend.rocksdb.checkpoint.transfer.thread.num"
    assert transfer_threads({}, at_s3) == DEFAULT_THREADS == 4
    assert transfer_threads({TRANSFER_THREADS: "8"}, at_s3) == 8
    assert transfer_threads({TRANSFER_THREADS: "0"}, at_s3) == 1
    assert transfer_threads({TRANSFER_THREADS: "many"}, at_s3) == DEFAULT_THREADS
    assert transfer_threads({TRANSFER_THREADS: "8"}, ["/var/ckpts/job/chk-3/op-0.state"]) == 1


def test_a_programs_transfer_threads_reach_the_jobs_configuration() -> None:
    from millstream.engine.datastream.state_backend import EmbeddedRocksDBStateBackend
    from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment

    backend = EmbeddedRocksDBStateBackend(True)
    backend.set_number_of_transfer_threads(8)
    assert backend.get_number_of_transfer_threads() == 8
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_state_backend(backend)
    config = env._job_config()
    assert transfer_threads(config, ["s3://b/job/chk-1/op-0.state"]) == 8
    with pytest.raises(ValueError, match="at least 1"):
        backend.set_number_of_transfer_threads(0)
