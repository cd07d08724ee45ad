"""The on-disk backend reads a full snapshot (and an incremental base) from LMDB's compacting copy
of the barrier's read transaction, so the live file does not grow while the snapshot is written
(issue 16): LMDB cannot reuse a page freed after a read transaction began, and a transaction held
for a whole Python-paced write left every page the task rewrote meanwhile at the end of the file.
Real LMDB; the task writes on this thread while another thread is inside the snapshot's read."""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
from millstream.engine.runtime.state.state_records import decode_record

MAX_P = 16
KEYS = 20_000


def _file_mb(directory: Path) -> float:
    return os.path.getsize(directory / "data.mdb") / 1e6


def _read_while_the_task_rewrites(backend: LmdbKeyedStateBackend, read: Any, rewrite: Any) -> dict:
    """Run ``read`` on another thread; once it is inside its first key group, call ``rewrite()`` here
    (the task going on), then let it finish. Returns {key: value} of what it read."""
    inside, go_on = threading.Event(), threading.Event()
    got: dict = {}

    def consume(groups: Any) -> None:
        for n, (_, tables) in enumerate(groups):
            if n == 0:
                inside.set()
                assert go_on.wait(60)
            for rows in tables.values():
                got.update(decode_record(lk, vb) for lk, vb in rows)

    errors: list[BaseException] = []

    def run() -> None:
        try:
            read(consume)
        except BaseException as e:  # noqa: BLE001 - reported on the test's thread
            errors.append(e)
            inside.set()

    reader = threading.Thread(target=run)
    reader.start()
    assert inside.wait(60)
    rewrite()
    go_on.set()
    reader.join(60)
    assert not errors, errors
    return got


def test_a_full_snapshot_holds_no_read_transaction_while_it_is_written(tmp_path: Path) -> None:
    directory = tmp_path / "lmdb"
    backend = LmdbKeyedStateBackend(MAX_P, directory, cache_entries=100)
    table = backend.table("v", "value")
    for k in range(KEYS):
        table[k] = ("x" * 40, 0)
    backend.flush()
    before = _file_mb(directory)

    def rewrite() -> None:
        for n in range(1, 6):  # every page rewritten five times while the snapshot is being written
            for k in range(KEYS):
                table[k] = ("x" * 40, n)
            backend.flush()

    got = _read_while_the_task_rewrites(backend, backend.begin_snapshot_parts(), rewrite)
    assert got == {k: ("x" * 40, 0) for k in range(KEYS)}  # the barrier's values, not the rewrites
    # with the transaction held through the write the file grew from 2.9 MB to 790 MB here: every
    # eviction's commit copies its pages anew while the snapshot holds the freed ones
    assert _file_mb(directory) < 2 * before
    assert not (directory / "snapshots").exists() or not os.listdir(directory / "snapshots")  # the copy is gone
    backend.close()
    assert not directory.exists()


def test_an_incremental_base_is_read_from_the_copy_too(tmp_path: Path) -> None:
    directory = tmp_path / "lmdb"
    backend = LmdbKeyedStateBackend(MAX_P, directory, cache_entries=100, incremental=True)
    table = backend.table("v", "value")
    for k in range(KEYS):
        table[k] = k
    backend.flush()
    before = _file_mb(directory)
    plan, read = backend.begin_incremental_snapshot_parts(1)
    assert plan.is_base

    def rewrite() -> None:
        for n in range(1, 6):
            for k in range(KEYS):
                table[k] = k * 10 + n
            backend.flush()

    got = _read_while_the_task_rewrites(backend, read, rewrite)
    assert got == {k: k for k in range(KEYS)}
    assert _file_mb(directory) < 2 * before
    backend.close()


def test_a_crashed_runs_snapshot_copies_are_removed_when_the_backend_opens(tmp_path: Path) -> None:
    directory = tmp_path / "lmdb"
    stale = directory / "snapshots" / "0123"
    stale.mkdir(parents=True)
    (stale / "data.mdb").write_bytes(b"\0" * 4096)
    backend = LmdbKeyedStateBackend(MAX_P, directory)
    assert not (directory / "snapshots").exists()
    backend.close()


def test_a_snapshot_of_a_closed_backend_fails_clearly_and_leaves_no_copy(tmp_path: Path) -> None:
    directory = tmp_path / "lmdb"
    backend = LmdbKeyedStateBackend(MAX_P, directory)
    backend.table("v", "value")[1] = 1
    read = backend.begin_snapshot_parts()
    backend.close()
    try:
        read(lambda groups: list(groups))
    except ValueError as e:
        assert "closed before this snapshot was read" in str(e)
    else:
        raise AssertionError("a snapshot read after close() must fail")
    assert not directory.exists()


def test_without_room_for_a_copy_a_snapshot_reads_the_transaction_itself(tmp_path: Path, caplog: Any) -> None:
    directory = tmp_path / "lmdb"
    backend = LmdbKeyedStateBackend(MAX_P, directory, cache_entries=100)
    table = backend.table("v", "value")
    for k in range(1_000):
        table[k] = k
    (directory / "snapshots").write_bytes(b"")  # a file where the copies go: no copy can be made
    read = backend.begin_snapshot_parts()
    for k in range(1_000):
        table[k] = -k  # after the barrier
    backend.flush()
    got: dict = {}
    read(lambda groups: [got.update(decode_record(lk, vb) for rows in t.values() for lk, vb in rows) for _, t in groups])
    assert got == {k: k for k in range(1_000)}
    assert "without a copy" in caplog.text
    backend.close()
