"""Flink's slot.request.timeout, enforced by the JobMaster (no processes): a job that cannot get its
slots in time fails with NoResourceAvailableException and holds nothing; one that gets them in time
runs; a restart that waits for slots is timed from the restart."""
from __future__ import annotations

from pathlib import Path

from millstream.engine.executiongraph.states import ExecutionState, JobStatus
from millstream.engine.jobmanager.job_master import JobMaster
from millstream.engine.resourcemanager.slot_pool import TaskManagerInfo
from tests.engine.jobmanager.test_job_master_savepoints import JOB, Harness, graph


def _harness(tmp: Path, parallelism: int, config: dict | None = None, timeout_ms: int = 5_000) -> Harness:
    h = Harness(tmp, graph(parallelism, config))
    h.jm = JobMaster(
        h.jm.job_graph, b"code", h.gw, h.store, h.clock, None, str(tmp / "checkpoints"), str(tmp / "savepoints"),
        slot_request_timeout_ms=timeout_ms,
    )
    h.jm.persist()
    return h


def test_a_job_that_gets_no_slots_in_time_fails_with_no_resource_available(tmp_path: Path) -> None:
    h = _harness(tmp_path, parallelism=6)  # the one TaskManager has 4 slots
    h.pool.allocate("other-job", 1)
    assert not h.jm.try_schedule(h.pool) and h.jm.status is JobStatus.CREATED
    h.tick(4_999)
    assert h.jm.status is JobStatus.CREATED
    h.tick(1)
    assert h.jm.status is JobStatus.FAILED
    cause = h.jm.eg.failure_cause
    assert cause.startswith("NoResourceAvailableException: Could not acquire the minimum required resources")
    assert "needs 6 slots and the cluster has 3 free of 4" in cause and "5000 ms (slot.request.timeout)" in cause
    (exc,) = h.store.list_exceptions(JOB)
    assert exc.exception_name == "NoResourceAvailableException" and exc.stacktrace == cause
    assert all(ev.current.state is ExecutionState.FAILED for _, ev in h.jm.eg.all_executions())
    assert h.pool.allocations == {s: "other-job" for s in h.pool.allocations}  # held nothing, leaves nothing
    assert h.store.get_job(JOB).state == "FAILED" and h.store.get_job(JOB).failure_cause == cause
    assert not h.gw.of("submit")


def test_slots_that_come_in_time_start_the_job_and_the_timer_stops(tmp_path: Path) -> None:
    h = _harness(tmp_path, parallelism=6)
    assert not h.jm.try_schedule(h.pool)
    h.tick(4_000)
    h.pool.register(TaskManagerInfo("tm-2", 4))
    assert h.jm.try_schedule(h.pool) and h.jm.status is JobStatus.RUNNING
    h.tick(60_000)
    assert h.jm.status is JobStatus.RUNNING


def test_the_jobs_own_slot_request_timeout_wins(tmp_path: Path) -> None:
    h = _harness(tmp_path, parallelism=6, config={"slot.request.timeout": "1 s"}, timeout_ms=300_000)
    assert not h.jm.try_schedule(h.pool)
    h.tick(1_000)
    assert h.jm.status is JobStatus.FAILED and "1000 ms" in h.jm.eg.failure_cause


def test_a_restart_waiting_for_slots_is_timed_from_the_restart(tmp_path: Path) -> None:
    config = {"restart-strategy": {"type": "fixed-delay", "attempts": 3, "delay_ms": 10}}
    h = _harness(tmp_path, parallelism=2, config=config)
    h.run()
    h.tick(60_000)  # long after the first request: it was met
    ts = int(h.clock() * 1000)
    h.pool.remove("tm-1")
    h.jm.on_taskmanager_lost("tm-1", "gone", h.pool)
    assert h.jm.status is JobStatus.RESTARTING
    h.tick(20)  # the backoff: back to CREATED, asking for slots no TaskManager has
    assert h.jm.status is JobStatus.CREATED and h.jm.slots_requested_at == ts + 20
    h.tick(4_900)
    assert h.jm.status is JobStatus.CREATED
    h.tick(100)
    assert h.jm.status is JobStatus.FAILED and "NoResourceAvailableException" in h.jm.eg.failure_cause
