"""JobMaster when Redis came back as a new, empty server: the attempt's tasks are failed at once and
the job restarts after its backoff, without waiting for confirmations Redis may have dropped."""
from __future__ import annotations

from pathlib import Path

from millstream.engine.executiongraph.states import ExecutionState, JobStatus
from tests.engine.jobmanager.test_job_master_savepoints import Harness, graph

RESTARTS = {"restart-strategy": {"type": "fixed-delay", "attempts": 5, "delay_ms": 10}}


def test_a_running_job_restarts_after_redis_lost_without_waiting_for_its_tasks(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config=RESTARTS)).run()
    h.jm.on_redis_lost("Redis restarted", h.pool)
    assert h.jm.status is JobStatus.RESTARTING
    assert all(ev.current.state is ExecutionState.FAILED for _, ev in h.jm.eg.all_executions())
    cancels = h.gw.of("cancel")
    assert cancels, "the old attempt's tasks are told to stop"
    assert h.store.list_exceptions(h.jm.job_id, limit=5)[0].exception_name == "RedisConnectionLost"
    h.tick(20)  # the 10 ms backoff, not the 30 s cancel timeout
    assert h.jm.eg.attempt == 1 and h.jm.status is JobStatus.RUNNING


def test_a_job_with_nothing_deployed_is_left_alone(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config=RESTARTS))
    h.jm.on_redis_lost("Redis restarted", h.pool)
    assert h.jm.status is JobStatus.CREATED and not h.gw.of("cancel")
