"""What a slot process tells its TaskManager about one subtask's metrics, for the TaskManager's own
Prometheus endpoint (engine/taskexecutor/metrics_server.py).

The same sample the slot publishes to Redis for the JobManager, plus what a reporter needs to label
it (job name, task name) and the user metrics with their kinds. Sent over a local pipe as msgpack
(``encode_reports``/``decode_reports``), not pickle: the TaskManager unpickles nothing that a process
running user code wrote. ``ended`` says the subtask is gone and its metrics are to be dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack

from millstream.engine.metrics.groups import UserMetricValue


@dataclass(frozen=True)
class TaskMetricsReport:
    job_id: str
    job_name: str
    vertex_id: str
    task_name: str  # the vertex (chain) name, as Flink's <task_name>
    subtask: int
    attempt: int
    figures: dict[str, Any] = field(default_factory=dict)  # TaskIOMetrics.sample()
    user_metrics: tuple[UserMetricValue, ...] = ()
    late_dropped_by_operator: tuple[tuple[str, int], ...] = ()
    ended: bool = False
    # (operator name as metrics name it, operator id) for the chain, head first: user metrics and late
    # records are keyed by operator name, and Flink's reporter labels them with <operator_id> as well.
    operator_ids: tuple[tuple[str, str], ...] = ()

    @property
    def attempt_id(self) -> str:
        """Flink's <task_attempt_id>. Flink (1.16+) writes an ExecutionAttemptID as
        ``<execution graph id>_<job vertex id>_<subtask>_<attempt>``; Millstream has no execution graph
        id apart from the job, so the job id stands in: unique per execution attempt across the cluster,
        and the same on every scrape of that attempt."""
        return f"{self.job_id}_{self.vertex_id}_{self.subtask}_{self.attempt}"

    def operator_id(self, operator_name: str) -> str:
        """The id of the chain's operator named ``operator_name`` (the first, should two share a name:
        their metrics share one cell then too); empty for a name the chain does not have."""
        return next((i for name, i in self.operator_ids if name == operator_name), "")

    @property
    def key(self) -> tuple[str, str, int]:
        """One entry per subtask: a newer attempt replaces the older one's figures."""
        return (self.job_id, self.vertex_id, self.subtask)


def encode_reports(reports: list[TaskMetricsReport]) -> bytes:
    """The reports as msgpack; a value msgpack cannot carry (a user gauge's object) goes as its text."""
    return msgpack.packb(
        [
            [r.job_id, r.job_name, r.vertex_id, r.task_name, r.subtask, r.attempt, r.figures,
             [[m.identifier, list(m.path), m.kind, m.value, [list(v) for v in m.variables]] for m in r.user_metrics],
             [list(p) for p in r.late_dropped_by_operator], r.ended, [list(p) for p in r.operator_ids]]
            for r in reports
        ],
        default=str,
    )


def decode_reports(data: bytes) -> list[TaskMetricsReport]:
    """Raises ValueError for anything that is not a list of reports as ``encode_reports`` writes them."""
    try:
        rows = msgpack.unpackb(data, strict_map_key=False)
        return [
            TaskMetricsReport(
                str(job_id), str(job_name), str(vertex_id), str(task_name), int(subtask), int(attempt), dict(figures),
                tuple(
                    UserMetricValue(str(i), tuple(str(p) for p in path), str(kind),
                                    tuple(value) if kind == "distribution" else value,
                                    tuple((str(k), str(v)) for k, v in variables))
                    for i, path, kind, value, variables in user
                ),
                tuple((str(op), int(n)) for op, n in late),
                bool(ended),
                tuple((str(name), str(op_id)) for name, op_id in operator_ids),
            )
            for job_id, job_name, vertex_id, task_name, subtask, attempt, figures, user, late, ended, operator_ids in rows
        ]
    except (TypeError, ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise ValueError(f"not a metrics report: {e}") from None
