"""JobMaster task-state races without processes: a task that finishes while its cancel is on the way."""
from __future__ import annotations

from pathlib import Path

from millstream.engine.executiongraph.states import ExecutionState, JobStatus
from tests.engine.jobmanager.test_job_master_savepoints import Harness, graph


def test_a_task_that_finishes_while_being_cancelled_completes_the_cancellation(tmp_path: Path) -> None:
    """Before: FINISHED was refused from CANCELING and the restart waited 30 s for the cancel timeout
    (every few restarts of a short job)."""
    h = Harness(tmp_path, graph(config={"restart-strategy": {"type": "fixed-delay", "attempts": 5, "delay_ms": 10}})).run()
    ts = int(h.clock() * 1000)
    h.jm.on_task_state(
        {"attempt": 0, "vertex": "v-agg", "subtask": 0, "state": "FAILED", "ts": ts, "tm": "tm-1", "error": "boom"},
        h.pool,
    )
    assert h.jm.status is JobStatus.RESTARTING
    for vertex, sub in [("v-src", 0), ("v-src", 1), ("v-agg", 1)]:  # the sources had already ended
        h.jm.on_task_state(
            {"attempt": 0, "vertex": vertex, "subtask": sub, "state": "FINISHED", "ts": ts, "tm": "tm-1"}, h.pool
        )
        assert h.jm.eg.vertices[vertex].subtasks[sub].current.state is ExecutionState.CANCELED
    h.tick(20)  # the 10 ms backoff, not the 30 s cancel timeout
    assert h.jm.eg.attempt == 1 and h.jm.status is JobStatus.RUNNING


def test_a_failover_keeps_the_jobs_start_time(tmp_path: Path) -> None:
    """A restart passes the job through CREATED again; its start-time (REST, dashboard, the stored
    record) is still when it was submitted. Before: the restart's time, as if the job were new."""
    from millstream.backend.services.job_views import job_detail, job_overview

    h = Harness(tmp_path, graph(config={"restart-strategy": {"type": "fixed-delay", "attempts": 5, "delay_ms": 10}}))
    submitted = h.jm.record().start_time
    h.clock.advance(5_000)
    h.run()
    h.jm.on_task_state(
        {"attempt": 0, "vertex": "v-agg", "subtask": 0, "state": "FAILED", "ts": int(h.clock() * 1000),
         "tm": "tm-1", "error": "boom"},
        h.pool,
    )
    h.report_all("CANCELED")
    h.tick(20)
    h.report_all("INITIALIZING")
    h.report_all("RUNNING")
    assert h.jm.eg.attempt == 1 and h.jm.status is JobStatus.RUNNING
    assert h.jm.eg.timestamps[JobStatus.CREATED.value] > submitted  # the restart did pass through CREATED
    record = h.jm.record()
    assert record.start_time == submitted
    now = int(h.clock() * 1000)
    assert job_detail(record, now)["start-time"] == job_overview(record, now)["start-time"] == submitted
    h.jm.persist()
    assert h.store.get_job(record.jid).start_time == submitted  # what a later JobManager resumes from
