"""Flink's checkpoint REST shapes, computed from a CheckpointStatsTracker and CheckpointConfig.

Pure functions: ``/jobs/{id}/checkpoints``, ``.../checkpoints/config``,
``.../checkpoints/details/{cid}``, ``.../details/{cid}/subtasks/{vid}``, and the
status of an asynchronous savepoint operation.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

from millstream.engine.checkpoint.config import CheckpointConfig
from millstream.engine.checkpoint.stats_tracker import (
    SUMMARY_METRICS,
    CheckpointStats,
    CheckpointStatsStatus,
    CheckpointStatsTracker,
    SubtaskStats,
)

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))


def percentile(sorted_values: list[float], p: float) -> float:
    """Commons Math's default (LEGACY) estimate, which Flink's histogram statistics use."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    if n == 1:
        return float(sorted_values[0])
    pos = p * (n + 1) / 100
    if pos < 1:
        return float(sorted_values[0])
    if pos >= n:
        return float(sorted_values[-1])
    lower_index = math.floor(pos)
    frac = pos - lower_index
    lower, upper = sorted_values[lower_index - 1], sorted_values[lower_index]
    return float(lower + frac * (upper - lower))


def summary(values: Iterable[float]) -> dict[str, Any]:
    """Flink's StatsSummaryDto: {min, max, avg, p50, p90, p95, p99, p999}; all 0 without values."""
    vals = sorted(values)
    if not vals:
        return {"min": 0, "max": 0, "avg": 0, **{name: 0.0 for name, _ in PERCENTILES}}
    return {
        "min": vals[0],
        "max": vals[-1],
        "avg": sum(vals) // len(vals),  # Flink reports the average as a long
        **{name: percentile(vals, p) for name, p in PERCENTILES},
    }


# -- /jobs/{id}/checkpoints ---------------------------------------------------------


def checkpoints_overview(tracker: CheckpointStatsTracker) -> dict[str, Any]:
    samples = [values for _, values in tracker.summary]
    return {
        "counts": {
            "restored": tracker.num_restored,
            "total": tracker.num_total,
            "in_progress": tracker.num_in_progress,
            "completed": tracker.num_completed,
            "failed": tracker.num_failed,
        },
        "summary": {m: summary(v[m] for v in samples) for m in SUMMARY_METRICS},
        "latest": {
            "completed": checkpoint_entry(tracker.latest_completed) if tracker.latest_completed else None,
            "savepoint": checkpoint_entry(tracker.latest_savepoint) if tracker.latest_savepoint else None,
            "failed": checkpoint_entry(tracker.latest_failed) if tracker.latest_failed else None,
            "restored": tracker.latest_restored.to_record() if tracker.latest_restored else None,
        },
        "history": [checkpoint_entry(s) for s in reversed(tracker.history.values())],  # newest first
    }


def checkpoint_entry(s: CheckpointStats) -> dict[str, Any]:
    """One history entry, also the body of ``/checkpoints/details/{cid}``."""
    entry: dict[str, Any] = {
        "id": s.checkpoint_id,
        "status": s.status.value,
        "is_savepoint": s.is_savepoint,
        "checkpoint_type": s.checkpoint_type.value,
        "trigger_timestamp": s.trigger_timestamp,
        "latest_ack_timestamp": s.latest_ack_timestamp,
        "state_size": s.total("state_size"),
        "checkpointed_size": s.total("checkpointed_size"),
        "end_to_end_duration": s.end_to_end_duration,
        "alignment_buffered": s.total("alignment_buffered"),
        "processed_data": s.total("processed_data"),
        "persisted_data": s.total("persisted_data"),
        "num_subtasks": s.total_subtasks,
        "num_acknowledged_subtasks": s.num_acknowledged,
        "is_unaligned": False,
        "tasks": {vid: task_entry(s, vid) for vid in s.num_subtasks},
    }
    if s.status is CheckpointStatsStatus.COMPLETED:
        entry["external_path"] = s.external_path or "<checkpoint-not-externally-addressable>"
        entry["discarded"] = s.discarded
    elif s.status is CheckpointStatsStatus.FAILED:
        entry["failure_timestamp"] = s.failure_timestamp
        entry["failure_message"] = s.failure_message
    return entry


def task_entry(s: CheckpointStats, vertex_id: str) -> dict[str, Any]:
    """Flink's TaskCheckpointStatistics: one vertex's share of a checkpoint."""
    subs = list(s.subtasks.get(vertex_id, {}).values())
    latest = max((x.ack_timestamp for x in subs), default=-1)
    n = s.num_subtasks.get(vertex_id, 0)
    if s.status is CheckpointStatsStatus.IN_PROGRESS:
        status = CheckpointStatsStatus.COMPLETED.value if n and len(subs) == n else CheckpointStatsStatus.IN_PROGRESS.value
    else:
        status = s.status.value
    return {
        "id": s.checkpoint_id,
        "status": status,
        "latest_ack_timestamp": latest,
        "state_size": sum(x.state_size for x in subs),
        "checkpointed_size": sum(x.checkpointed_size for x in subs),
        "end_to_end_duration": max(0, latest - s.trigger_timestamp),
        "alignment_buffered": sum(x.alignment_buffered for x in subs),
        "processed_data": sum(x.processed_data for x in subs),
        "persisted_data": sum(x.persisted_data for x in subs),
        "num_subtasks": n,
        "num_acknowledged_subtasks": len(subs),
    }


# -- /jobs/{id}/checkpoints/details/{cid}[/subtasks/{vid}] ---------------------------


def checkpoint_details(tracker: CheckpointStatsTracker, checkpoint_id: int) -> dict[str, Any] | None:
    """None when the checkpoint is unknown or has left the history (REST answers 404)."""
    s = tracker.get(checkpoint_id)
    return checkpoint_entry(s) if s is not None else None


def subtask_details(tracker: CheckpointStatsTracker, checkpoint_id: int, vertex_id: str) -> dict[str, Any] | None:
    """Flink's TaskCheckpointStatisticsWithSubtaskDetails; None for an unknown checkpoint or vertex."""
    s = tracker.get(checkpoint_id)
    if s is None or vertex_id not in s.num_subtasks:
        return None
    acked = s.subtasks.get(vertex_id, {})
    subs = list(acked.values())
    return {
        **task_entry(s, vertex_id),
        "summary": {
            "checkpointed_size": summary(x.checkpointed_size for x in subs),
            "state_size": summary(x.state_size for x in subs),
            "end_to_end_duration": summary(_e2e(s, x) for x in subs),
            "checkpoint_duration": {
                "sync": summary(x.sync_ms for x in subs),
                "async": summary(x.async_ms for x in subs),
            },
            "alignment": {
                "buffered": summary(x.alignment_buffered for x in subs),
                "processed": summary(x.processed_data for x in subs),
                "persisted": summary(x.persisted_data for x in subs),
                "duration": summary(x.alignment_ms for x in subs),
            },
            "start_delay": summary(x.start_delay_ms for x in subs),
        },
        "subtasks": [
            _subtask_entry(s, acked[i]) if i in acked else {"index": i, "status": "pending_or_failed"}
            for i in range(s.num_subtasks[vertex_id])
        ],
    }


def _e2e(s: CheckpointStats, x: SubtaskStats) -> int:
    return max(0, x.ack_timestamp - s.trigger_timestamp)


def _subtask_entry(s: CheckpointStats, x: SubtaskStats) -> dict[str, Any]:
    return {
        "index": x.index,
        "status": "completed",
        "ack_timestamp": x.ack_timestamp,
        "end_to_end_duration": _e2e(s, x),
        "state_size": x.state_size,
        "checkpointed_size": x.checkpointed_size,
        "checkpoint": {"sync": x.sync_ms, "async": x.async_ms},
        "alignment": {
            "buffered": x.alignment_buffered,
            "processed": x.processed_data,
            "persisted": x.persisted_data,
            "duration": x.alignment_ms,
        },
        "start_delay": x.start_delay_ms,
        "unaligned_checkpoint": False,
        "aborted": False,
    }


# -- /jobs/{id}/checkpoints/config ---------------------------------------------------


def checkpoint_config(config: CheckpointConfig) -> dict[str, Any] | None:
    """None when checkpointing is disabled: Flink answers 404 "Checkpointing is not enabled for this job"."""
    if not config.is_checkpointing_enabled():
        return None
    return {
        "mode": config.mode.value.lower(),
        "interval": config.interval_ms,
        "timeout": config.timeout_ms,
        "min_pause": config.min_pause_ms,
        "max_concurrent": config.max_concurrent,
        "externalization": {
            "enabled": config.externalized.is_enabled(),
            "delete_on_cancellation": config.externalized.delete_on_cancellation(),
        },
        "state_backend": "HashMapStateBackend",
        "checkpoint_storage": "FileSystemCheckpointStorage" if config.storage_dir else "JobManagerCheckpointStorage",
        "unaligned_checkpoints": False,
        "tolerable_failed_checkpoints": config.tolerable_failures,
        "aligned_checkpoint_timeout": 0,
        "checkpoints_after_tasks_finish": True,
        "state_changelog_enabled": False,
    }


# -- /jobs/{id}/savepoints/{triggerid} ------------------------------------------------


def savepoint_operation(s: CheckpointStats | None) -> dict[str, Any] | None:
    """Flink's asynchronous-operation answer for the savepoint (or manual checkpoint) a request triggered."""
    if s is None:
        return None
    if s.status is CheckpointStatsStatus.IN_PROGRESS:
        return {"status": {"id": "IN_PROGRESS"}, "operation": None}
    if s.status is CheckpointStatsStatus.COMPLETED:
        result = {"location": s.external_path} if s.is_savepoint else {"checkpointId": s.checkpoint_id}
        return {"status": {"id": "COMPLETED"}, "operation": result}
    return {
        "status": {"id": "COMPLETED"},
        "operation": {
            "failure-cause": {
                "class": "org.apache.flink.runtime.checkpoint.CheckpointException",
                "stack-trace": s.failure_message or "",
                "serialized-throwable": None,
            }
        },
    }
