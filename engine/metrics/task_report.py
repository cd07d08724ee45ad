"""What a slot process tells its TaskManager about one subtask's metrics, for the TaskManager's own
Prometheus endpoint (engine/taskexecutor/metrics_server.py).

The same sample the slot publishes to Redis for the JobManager, plus what a reporter needs to label
it (job name, task name) and the user metrics with their kinds. Sent over a local pipe, so it is a
plain picklable value; ``ended`` says the subtask is gone and its metrics are to be dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.metrics.groups import UserMetricValue


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

    @property
    def key(self) -> tuple[str, str, int]:
        """One entry per subtask: a newer attempt replaces the older one's figures."""
        return (self.job_id, self.vertex_id, self.subtask)
