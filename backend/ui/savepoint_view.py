"""View model of the job page's Savepoints tab: one row per savepoint request, newest first,
built from the Dispatcher's ``SavepointRecord``s. Nothing here does I/O."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from millstream.backend.services.resume import is_fixed_parallelism
from millstream.engine.jobmanager.job_store import SavepointRecord


@dataclass(frozen=True)
class SavepointRow:
    request_id: str
    dom_id: str  # a request id may hold '.', which a CSS selector would misread
    status: str  # IN_PROGRESS | COMPLETED | FAILED
    kind: str  # what the user asked for, in words
    checkpoint_id: int | None
    trigger_timestamp: int
    completion_timestamp: int | None
    duration: int | None
    target_directory: str
    path: str | None
    failure_cause: str | None

    @property
    def resumable(self) -> bool:
        return self.status == "COMPLETED" and bool(self.path)


@dataclass(frozen=True)
class SavepointsTab:
    rows: tuple[SavepointRow, ...]
    can_trigger: bool  # the job is running on the streaming runtime
    why_not: str | None  # when it cannot: why, in words
    default_dir: str | None  # where a savepoint goes when the form names no directory
    parallelism: int  # the job's default parallelism, the resume form's starting value
    max_parallelism: int  # the most a resumed job's default-parallelism vertices can take
    sources_stay: bool  # the job has non-parallel sources (or, for an older JobGraph, sources at 1): they stay at 1

    @property
    def in_progress(self) -> bool:
        return any(r.status == "IN_PROGRESS" for r in self.rows)


def kind_of(record: SavepointRecord) -> str:
    if record.is_stop:
        return "stop with savepoint, drained" if record.drain else "stop with savepoint"
    return "savepoint, then cancel" if record.cancel_job else "savepoint"


def savepoint_row(record: SavepointRecord) -> SavepointRow:
    done = record.completion_timestamp
    return SavepointRow(
        request_id=record.request_id,
        dom_id="sp-" + hashlib.sha1(record.request_id.encode()).hexdigest()[:12],
        status=record.status,
        kind=kind_of(record),
        checkpoint_id=record.checkpoint_id,
        trigger_timestamp=record.trigger_timestamp,
        completion_timestamp=done,
        duration=done - record.trigger_timestamp if done is not None else None,
        target_directory=record.target_directory,
        path=record.path,
        failure_cause=record.failure_cause,
    )


def default_savepoint_dir(job_config: dict[str, Any], cluster_dir: str | None) -> str | None:
    """The job's ``state.savepoints.dir``, else the cluster's default, as the JobManager chooses."""
    configured = job_config.get("state.savepoints.dir")
    return str(configured).removeprefix("file://") if configured else cluster_dir


def savepoints_tab(
    records: Sequence[SavepointRecord], job_graph: dict[str, Any], *, alive: bool, on_spark: bool, cluster_dir: str | None
) -> SavepointsTab:
    config = job_graph.get("config") or {}
    vertices = job_graph.get("vertices") or []
    parallelism = config.get("parallelism.default")
    if not isinstance(parallelism, int) or parallelism < 1:
        parallelism = max((v["parallelism"] for v in vertices), default=1)
    at_default = [v["max_parallelism"] for v in vertices if v["parallelism"] == parallelism]
    why_not = None
    if on_spark:
        why_not = "This job runs on Spark, which takes no savepoints."
    elif not alive:
        why_not = "The job has ended, so it can take no new savepoint."
    return SavepointsTab(
        rows=tuple(savepoint_row(r) for r in records),
        can_trigger=why_not is None,
        why_not=why_not,
        default_dir=default_savepoint_dir(config, cluster_dir),
        parallelism=parallelism,
        max_parallelism=min(at_default, default=128),
        sources_stay=any(v.get("is_source") and is_fixed_parallelism(v) for v in vertices),
    )
