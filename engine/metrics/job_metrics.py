"""The JobManager's metrics under Flink's names: the cluster's (``numRegisteredTaskManagers``, ...) and
each job's (``numRestarts``, ``uptime``, checkpoint counts, ...), computed from plain values.

Pure: the REST metric endpoints and the Prometheus ``/metrics`` scrape both read their numbers here,
so the two always agree. Times are epoch milliseconds; durations milliseconds; sizes bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from millstream.engine.executiongraph.states import JobStatus

#: Flink's JobManager-scope metric names, in the order they are reported.
JOBMANAGER_METRICS = ("numRegisteredTaskManagers", "numRunningJobs", "taskSlotsTotal", "taskSlotsAvailable")

#: Flink's job-scope metric names (JobManager side): availability, then checkpointing.
JOB_METRICS = (
    "numRestarts", "fullRestarts", "uptime", "downtime", "restartingTime",
)
CHECKPOINT_METRICS = (
    "numberOfCompletedCheckpoints", "numberOfFailedCheckpoints", "numberOfInProgressCheckpoints",
    "totalNumberOfCheckpoints", "lastCheckpointDuration", "lastCheckpointSize", "lastCheckpointFullSize",
    "lastCheckpointRestoreTimestamp",
)


@dataclass(frozen=True)
class JobMetricInputs:
    """What a job's metrics are computed from: its status, when it last entered each status, how
    often it restarted, and Flink's checkpoint overview (``GET /jobs/{id}/checkpoints``), or None
    when the job does not checkpoint."""

    job_id: str
    job_name: str
    status: JobStatus
    timestamps: Mapping[str, int] = field(default_factory=dict)
    restarts: int = 0
    checkpoints: Mapping[str, Any] | None = None


def jobmanager_values(overview: Mapping[str, int]) -> dict[str, float]:
    """The cluster's figures from ``Dispatcher.overview()`` (``GET /overview``'s counts)."""
    return {
        "numRegisteredTaskManagers": overview["taskmanagers"],
        "numRunningJobs": overview["jobs-running"],
        "taskSlotsTotal": overview["slots-total"],
        "taskSlotsAvailable": overview["slots-available"],
    }


def job_values(job: JobMetricInputs, now_ms: int) -> dict[str, float]:
    """Flink's job metrics. ``uptime`` is how long the job has been RUNNING without interruption (0
    while it is not running, -1 once it ended); ``downtime`` how long it has been FAILING or
    RESTARTING since it last ran (0 while running or not yet started, -1 once it ended), as Flink's
    UpTimeGauge and DownTimeGauge define them."""
    status, ts = job.status, job.timestamps
    ended = status.is_terminal()
    uptime = -1 if ended else (max(now_ms - ts.get(JobStatus.RUNNING.value, now_ms), 0) if status is JobStatus.RUNNING else 0)
    down_since = _down_since(job)
    downtime = -1 if ended else (max(now_ms - down_since, 0) if down_since is not None else 0)
    restarting_since = ts.get(JobStatus.RESTARTING.value)
    restarting = (
        -1 if ended else (max(now_ms - restarting_since, 0) if status is JobStatus.RESTARTING and restarting_since else 0)
    )
    values: dict[str, float] = {
        "numRestarts": job.restarts,
        "fullRestarts": job.restarts,  # Flink's older name for the same count; its dashboards still use it
        "uptime": uptime,
        "downtime": downtime,
        "restartingTime": restarting,
    }
    if job.checkpoints is not None:
        values.update(checkpoint_values(job.checkpoints))
    return values


def _down_since(job: JobMetricInputs) -> int | None:
    """When the job last stopped running to fail or restart, while it is still failing or restarting."""
    if job.status not in (JobStatus.FAILING, JobStatus.RESTARTING):
        return None
    ran = job.timestamps.get(JobStatus.RUNNING.value, 0)
    # The earliest of FAILING/RESTARTING entered since the job last ran: a restart loop that never got
    # back to RUNNING is one down period, not several.
    since = [t for s in (JobStatus.FAILING, JobStatus.RESTARTING) if (t := job.timestamps.get(s.value)) and t >= ran]
    return min(since) if since else None


def checkpoint_values(overview: Mapping[str, Any]) -> dict[str, float]:
    """Flink's checkpointing metrics from the checkpoint overview: -1 for a figure about the last
    completed checkpoint (or restore) while there is none, as Flink reports it."""
    counts = overview.get("counts") or {}
    latest = overview.get("latest") or {}
    completed = latest.get("completed") or None
    restored = latest.get("restored") or None
    return {
        "numberOfCompletedCheckpoints": counts.get("completed", 0),
        "numberOfFailedCheckpoints": counts.get("failed", 0),
        "numberOfInProgressCheckpoints": counts.get("in_progress", 0),
        "totalNumberOfCheckpoints": counts.get("total", 0),
        "lastCheckpointDuration": _number(completed, "end_to_end_duration"),
        "lastCheckpointSize": _number(completed, "checkpointed_size"),
        "lastCheckpointFullSize": _number(completed, "state_size"),
        "lastCheckpointRestoreTimestamp": _number(restored, "restore_timestamp", "timestamp"),
    }


def _number(entry: Mapping[str, Any] | None, *keys: str) -> float:
    for key in keys:
        value = (entry or {}).get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    return -1
