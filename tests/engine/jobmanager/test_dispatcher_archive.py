"""Ended jobs leave the Dispatcher's memory for the JobStore (issue 13, item 9), against the test's real
Redis with an in-memory JobStore and a fake clock: before, every job ever run stayed in memory with its
user code and was ticked forever."""
from __future__ import annotations

from typing import Iterator

import pytest
import redis

from millstream.engine.jobmanager.dispatcher import Dispatcher, DispatcherConfig
from millstream.engine.jobmanager.job_store import InMemoryJobStore
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


def test_a_client_reading_after_its_job_left_memory_keeps_its_positions_within_a_bound(client, tmp_path) -> None:
    """Collect positions were once kept per job id for a read that came after the archive, forever; made
    afresh on each call, they knew no copy. Now the 32 jobs read most recently keep theirs."""
    clock = Clock()
    d = Dispatcher(client, InMemoryJobStore(), DispatcherConfig(archive_after_ms=0, checkpoint_dir=str(tmp_path), cluster_secret="s" * 32), clock)
    jid = d.submit(graph(), b"user code")
    assert d.cancel(jid)
    clock.advance(1_000)
    d._archive_ended()
    assert jid not in d.jobs
    _, ended, _ = d.collect(jid, 0)
    assert ended
    positions = d.collect_positions(jid)
    d.collect(jid, 0)
    assert d.collect_positions(jid) is positions  # the same memory for the next call
    for i in range(32):
        d.collect_positions(f"{i:032x}")
    assert len(d._collect_positions) == 32 and jid not in d._collect_positions


def test_periodic_readers_see_only_unfinished_jobs_and_the_overview_counts_the_rest(client, tmp_path) -> None:
    """The dashboard's sampler, the overview and recovery must not load every stored job (issue 13's soak:
    JobManager memory grew with its history)."""
    from millstream.engine.jobmanager.job_store import JobRecord

    clock = Clock()
    store = InMemoryJobStore()
    for i in range(5):
        store.save_job(JobRecord(f"{i:032x}", f"old-{i}", "FINISHED", "STREAMING", start_time=i))
    d = Dispatcher(client, store, DispatcherConfig(archive_after_ms=0, checkpoint_dir=str(tmp_path)), clock)
    jid = d.submit(graph(), b"user code")  # waits for slots: CREATED, counted as running
    assert [r.jid for r in d.job_records(unfinished_only=True)] == [jid]
    assert len(d.job_records()) == 6
    overview = d.overview()
    assert (overview["jobs-running"], overview["jobs-finished"]) == (1, 5)
    assert d.cancel(jid)
    assert d.job_records(unfinished_only=True) == []
    assert d.overview()["jobs-cancelled"] == 1


def test_the_checkpoint_history_keeps_as_many_as_configured_live_after_a_restart_and_once_archived(client, tmp_path) -> None:
    """Flink's web.checkpoints.history (MILLSTREAM_CHECKPOINTS_HISTORY): a benchmark reading every
    checkpoint's details once its job ended needs more than the default 10, and each of the three ways a
    Dispatcher builds a job's statistics must take the setting."""
    from millstream.engine.checkpoint.stats_tracker import CheckpointStats, CheckpointStatsStatus, CheckpointType

    clock = Clock()
    store = InMemoryJobStore()
    config = DispatcherConfig(archive_after_ms=0, checkpoint_dir=str(tmp_path), checkpoints_history=3)
    d = Dispatcher(client, store, config, clock)
    jid = d.submit(graph(config={"execution.checkpointing": {"interval_ms": 100}}), b"user code")
    live = d.jobs[jid].checkpointing.coordinator.stats
    assert live.history_size == 3
    for cid in range(1, 6):
        live.report_pending(CheckpointStats(cid, CheckpointType.CHECKPOINT, 1000 * cid, {"v-src": 2, "v-agg": 2}))
        live.report_completed(cid, None)
    assert [e["id"] for e in d.checkpointing(jid).overview()["history"]] == [5, 4, 3]
    d.jobs[jid].checkpointing.flush_history()
    assert len(store.list_checkpoints(jid)) == 5  # the store keeps every one
    assert d._history(jid).history_size == 3  # a restarted JobManager's rebuild
    assert d.cancel(jid)
    clock.advance(1_000)
    d._archive_ended()
    assert jid not in d.jobs
    archived = d.checkpointing(jid).overview()
    assert [e["id"] for e in archived["history"]] == [5, 4, 3] and archived["counts"]["completed"] == 5
    default = Dispatcher(client, store, DispatcherConfig(checkpoint_dir=str(tmp_path)), clock)
    assert [e["id"] for e in default.checkpointing(jid).overview()["history"]] == [5, 4, 3, 2, 1]
