"""Ended jobs leave the Dispatcher's memory for the JobStore (issue 13, item 9), against the test's real
Redis with an in-memory JobStore and a fake clock: before, every job ever run stayed in memory with its
user code and was ticked forever."""
from __future__ import annotations

from typing import Iterator

import pytest
import redis

from engine.jobmanager.dispatcher import Dispatcher, DispatcherConfig
from engine.jobmanager.job_store import InMemoryJobStore
from tests.engine.jobmanager.test_job_master_savepoints import JOB, Clock, graph


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def test_an_ended_job_leaves_memory_after_the_retention_and_reads_answer_from_the_store(client, tmp_path) -> None:
    clock = Clock()
    store = InMemoryJobStore()
    d = Dispatcher(client, store, DispatcherConfig(archive_after_ms=5_000, checkpoint_dir=str(tmp_path)), clock)
    jid = d.submit(graph(), b"user code")  # no TaskManager: it waits for slots
    assert jid == JOB and d.job_record(jid).state == "CREATED"
    assert d.cancel(jid)
    live = d.job_record(jid)
    assert live.state == "CANCELED"
    clock.advance(4_000)
    d._archive_ended()
    assert jid in d.jobs  # recently ended: still live
    clock.advance(1_000)
    d._archive_ended()
    assert jid not in d.jobs  # left memory, with its user code
    archived = d.job_record(jid)
    assert (archived.state, archived.end_time, archived.timestamps) == (live.state, live.end_time, live.timestamps)
    assert archived.job_graph == live.job_graph
    assert [r.jid for r in d.job_records()] == [jid]
    assert d.overview()["jobs-cancelled"] == 1
    assert d.cancel(jid) is False
    assert d.savepoints(jid) == []
    assert d.checkpoint_status(jid, "no-such-request") is None
    assert d.status_message(jid) is None


def test_a_running_job_is_never_archived(client, tmp_path) -> None:
    clock = Clock()
    d = Dispatcher(client, InMemoryJobStore(), DispatcherConfig(archive_after_ms=0, checkpoint_dir=str(tmp_path)), clock)
    jid = d.submit(graph(), b"user code")
    clock.advance(60_000)
    d._archive_ended()
    assert jid in d.jobs
