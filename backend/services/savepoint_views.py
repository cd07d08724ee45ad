"""Savepoint requests in Flink's REST shapes: the asynchronous-operation answer and a list entry.

The dashboard's Savepoints tab uses ``savepoint_entry`` too, so both show the same figures.
"""
from __future__ import annotations

from typing import Any

from millstream.engine.jobmanager.job_store import SavepointRecord

CHECKPOINT_EXCEPTION = "org.apache.flink.runtime.checkpoint.CheckpointException"


def operation_status(record: SavepointRecord) -> dict[str, Any]:
    """``{status: {id}, operation}`` as Flink answers ``GET /jobs/{id}/savepoints/{triggerid}``:
    a failed savepoint is COMPLETED with a ``failure-cause``."""
    if record.status == "IN_PROGRESS":
        return {"status": {"id": "IN_PROGRESS"}, "operation": None}
    if record.status == "COMPLETED":
        return {"status": {"id": "COMPLETED"}, "operation": {"location": record.path}}
    return {
        "status": {"id": "COMPLETED"},
        "operation": {
            "failure-cause": {
                "class": CHECKPOINT_EXCEPTION,
                "stack-trace": record.failure_cause or "",
                "serialized-throwable": None,
            }
        },
    }


def savepoint_entry(record: SavepointRecord) -> dict[str, Any]:
    """One savepoint of ``GET /jobs/{id}/savepoints`` (a Millstream addition)."""
    duration = (
        record.completion_timestamp - record.trigger_timestamp if record.completion_timestamp is not None else None
    )
    return {
        "request-id": record.request_id,
        "checkpoint-id": record.checkpoint_id,
        "status": record.status,
        "type": record.checkpoint_type,
        "stop": record.is_stop,
        "drain": record.drain,
        "cancel-job": record.cancel_job,
        "trigger-timestamp": record.trigger_timestamp,
        "completion-timestamp": record.completion_timestamp,
        "duration": duration,
        "target-directory": record.target_directory,
        "location": record.path,
        "failure-cause": record.failure_cause,
    }
