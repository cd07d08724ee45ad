"""Flink's job and JobManager metric values from plain inputs (no servers)."""
from __future__ import annotations

from millstream.engine.executiongraph.states import JobStatus
from millstream.engine.metrics.job_metrics import JobMetricInputs, job_values, jobmanager_values


def test_jobmanager_values_from_the_overview() -> None:
    overview = {"taskmanagers": 3, "slots-total": 6, "slots-available": 1, "jobs-running": 2, "jobs-finished": 9}
    assert jobmanager_values(overview) == {
        "numRegisteredTaskManagers": 3, "numRunningJobs": 2, "taskSlotsTotal": 6, "taskSlotsAvailable": 1,
    }


def test_uptime_counts_from_the_last_time_the_job_started_running() -> None:
    job = JobMetricInputs("j", "n", JobStatus.RUNNING, {"CREATED": 0, "RUNNING": 5_000, "RESTARTING": 3_000}, restarts=2)
    v = job_values(job, 9_000)
    assert v["uptime"] == 4_000 and v["downtime"] == 0 and v["numRestarts"] == 2 and v["fullRestarts"] == 2
    assert "numberOfCompletedCheckpoints" not in v  # no checkpointing: no checkpoint metrics


def test_downtime_while_failing_and_restarting() -> None:
    job = JobMetricInputs("j", "n", JobStatus.RESTARTING, {"RUNNING": 1_000, "FAILING": 2_000, "RESTARTING": 2_500})
    v = job_values(job, 4_000)
    assert v["uptime"] == 0 and v["downtime"] == 2_000 and v["restartingTime"] == 1_500
    created = job_values(JobMetricInputs("j", "n", JobStatus.CREATED, {"CREATED": 0}), 4_000)
    assert created["uptime"] == 0 and created["downtime"] == 0


def test_an_ended_job_reports_minus_one() -> None:
    v = job_values(JobMetricInputs("j", "n", JobStatus.FINISHED, {"RUNNING": 1, "FINISHED": 2}), 10)
    assert v["uptime"] == -1 and v["downtime"] == -1


def test_checkpoint_values_from_the_overview() -> None:
    overview = {
        "counts": {"completed": 4, "failed": 1, "in_progress": 1, "total": 6},
        "latest": {"completed": {"end_to_end_duration": 120, "checkpointed_size": 2048, "state_size": 4096},
                   "restored": None},
    }
    v = job_values(JobMetricInputs("j", "n", JobStatus.RUNNING, {"RUNNING": 0}, checkpoints=overview), 1)
    assert v["numberOfCompletedCheckpoints"] == 4 and v["numberOfFailedCheckpoints"] == 1
    assert v["lastCheckpointDuration"] == 120 and v["lastCheckpointSize"] == 2048 and v["lastCheckpointFullSize"] == 4096
    assert v["lastCheckpointRestoreTimestamp"] == -1
    none_yet = job_values(JobMetricInputs("j", "n", JobStatus.RUNNING, {}, checkpoints={"counts": {}, "latest": {}}), 1)
    assert none_yet["lastCheckpointDuration"] == -1 and none_yet["numberOfCompletedCheckpoints"] == 0
