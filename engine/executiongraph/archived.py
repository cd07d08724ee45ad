"""ArchivedExecutionGraph: a plain-data snapshot of a job's vertices and subtasks.

Live jobs and finished jobs (read back from SQL) are both shown from this
shape, so the REST layer has one code path for both.
"""
from __future__ import annotations

from typing import Any

from engine.executiongraph.execution_graph import ExecutionGraph

TERMINAL_TASK_STATES = ("FINISHED", "CANCELED", "FAILED")


def archive_vertices(eg: ExecutionGraph, metrics: dict[tuple[str, int], dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for vid, ejv in eg.vertices.items():
        jv = ejv.job_vertex
        subtasks = []
        for ev in ejv.subtasks:
            ex = ev.current
            m = metrics.get((vid, ev.subtask), {})
            subtasks.append(
                {
                    "subtask": ev.subtask,
                    "status": ex.state.value,
                    "attempt": ex.attempt,
                    "taskmanager_id": ex.taskmanager_id,
                    "slot": ex.slot,
                    "timestamps": dict(ex.timestamps),
                    "failure": ex.failure,
                    "metrics": m,
                }
            )
        out.append(
            {
                "id": vid,
                "name": jv.name,
                "parallelism": jv.parallelism,
                "maxParallelism": jv.max_parallelism,
                "status": ejv.aggregate_state().value,
                "tasks": ejv.state_counts(),
                "subtasks": subtasks,
            }
        )
    return out
