"""ArchivedExecutionGraph: a plain-data snapshot of a job's vertices and subtasks.

Live jobs and finished jobs (read back from SQL) are both shown from this
shape, so the REST layer has one code path for both.
"""
from __future__ import annotations

from typing import Any

from millstream.engine.executiongraph.execution_graph import ExecutionGraph
from millstream.engine.executiongraph.states import JobStatus
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.jobmanager.job_store import JobRecord

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


def job_record(
    job_graph: JobGraph,
    eg: ExecutionGraph,
    metrics: dict[tuple[str, int], dict[str, Any]],
    user_code: bytes | None,
) -> JobRecord:
    """The durable record of a job as it stands now (``user_code=None`` keeps the stored code)."""
    ts = eg.timestamps
    start = eg.start_time or ts.get(JobStatus.CREATED.value, 0)
    end = ts.get(eg.status.value, -1) if eg.status.is_terminal() else -1
    return JobRecord(
        jid=job_graph.job_id,
        name=job_graph.name,
        state=eg.status.value,
        job_type=job_graph.job_type,
        start_time=start,
        end_time=end,
        last_modification=max(ts.values()) if ts else start,
        job_graph=job_graph.to_dict(),
        timestamps=dict(ts),
        vertices=archive_vertices(eg, metrics),
        failure_cause=eg.failure_cause,
        user_code=user_code,
    )
