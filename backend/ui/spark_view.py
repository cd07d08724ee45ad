"""View model of the job page's Spark tab: a BATCH job's Spark jobs and stages, folded
from the progress the Spark driver publishes (``millstream.engine.spark.driver.progress_snapshot``).

Pure functions; ``millstream.backend.ui.context`` fetches the progress from the Dispatcher.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Why a job has no stages to show; the template words each one.
NATIVE = "native"  # the job runs on Millstream's own runtime, not Spark
UNKNOWN = "unknown"  # Spark ran it, but the JobManager no longer holds the figures
STARTING = "starting"  # the driver has not published yet
NEVER_STARTED = "never-started"  # the job ended before Spark published anything
NO_STAGES = "no-stages"  # Spark is up, no stage submitted yet


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@dataclass(frozen=True)
class SparkStage:
    id: int
    job_id: int | None
    name: str
    tasks: int
    completed: int
    active: int
    failed: int  # failed attempts: with retries this can exceed ``tasks``
    status: str  # complete, active, pending or skipped


    def pct(self, n: int) -> float:
        """``n`` tasks as a bar width in percent of the stage's tasks (failed ones included
        in the total so the three segments always fit)."""
        total = max(self.tasks, self.completed + self.active + self.failed, 1)
        return round(100 * n / total, 2)


@dataclass(frozen=True)
class SparkJob:
    id: int
    status: str
    stage_ids: tuple[int, ...]


@dataclass(frozen=True)
class SparkProgress:
    state: str | None  # None when there are stages; else one of the reasons above
    application_id: str | None
    master: str | None
    ui_url: str | None  # only an http(s) URL: the figure comes from Redis, not from us
    ui_live: bool  # Spark's UI closes with its SparkContext, i.e. when the job ends
    jobs: tuple[SparkJob, ...]
    stages: tuple[SparkStage, ...]
    updated: int | None

    @property
    def tasks_completed(self) -> int:
        return sum(s.completed for s in self.stages if s.status != "skipped")

    @property
    def tasks_total(self) -> int:
        """Tasks of the stages that run: a skipped stage never will."""
        return sum(s.tasks for s in self.stages if s.status != "skipped")


def _stage(raw: Mapping[str, Any], job_status: Mapping[int, str]) -> SparkStage:
    sid = raw.get("stageId", raw.get("id"))
    job_id = raw.get("jobId") if isinstance(raw.get("jobId"), int) else None
    tasks, completed, active = _count(raw.get("numTasks")), _count(raw.get("numCompletedTasks")), _count(raw.get("numActiveTasks"))
    if tasks and completed >= tasks:
        status = "complete"
    elif active:
        status = "active"
    elif job_status.get(job_id) == "SUCCEEDED":
        # A later Spark job reusing an earlier job's shuffle output skips the stage that
        # wrote it: Spark still lists it, with no task run. Its UI calls it skipped too.
        status = "skipped"
    else:
        status = "pending"
    return SparkStage(
        id=sid if isinstance(sid, int) else -1,
        job_id=job_id,
        name=str(raw.get("name") or ""),
        tasks=tasks,
        completed=completed,
        active=active,
        failed=_count(raw.get("numFailedTasks")),
        status=status,
    )


def _ui_url(value: Any) -> str | None:
    return value if isinstance(value, str) and value.startswith(("http://", "https://")) else None


def spark_progress(progress: Mapping[str, Any] | None, engine: str, alive: bool) -> SparkProgress:
    """``progress`` is ``Dispatcher.spark_progress`` (None when the JobManager holds no
    Spark job master for it); ``engine`` the batch engine the job was submitted for."""
    p = progress or {}
    jobs = tuple(
        SparkJob(j["jobId"], str(j.get("status", "")), tuple(j.get("stageIds") or ()))
        for j in p.get("jobs") or []
        if isinstance(j, Mapping) and isinstance(j.get("jobId"), int)
    )
    job_status = {j.id: j.status for j in jobs}
    raw_stages = (s for s in p.get("stages") or [] if isinstance(s, Mapping))
    stages = tuple(sorted((_stage(s, job_status) for s in raw_stages), key=lambda s: s.id))
    if stages:
        state = None
    elif progress is None:
        state = NATIVE if engine == "native" else UNKNOWN
    elif not p.get("applicationId"):
        state = STARTING if alive else NEVER_STARTED
    else:
        state = NO_STAGES
    updated = p.get("updated")
    return SparkProgress(
        state=state,
        application_id=p.get("applicationId") or None,
        master=p.get("master") or None,
        ui_url=_ui_url(p.get("uiWebUrl")),
        ui_live=alive,
        jobs=jobs,
        stages=stages,
        updated=updated if isinstance(updated, int) else None,
    )
