"""A keyed OperatorContext for driving operators directly in unit tests (no task, no channels)."""
from __future__ import annotations

from typing import Any, Callable

from millstream.engine.runtime.operators.base import OperatorContext
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.task_metrics import TaskIOMetrics


def keyed_context(
    operator_name: str,
    clock: Callable[[], int],
    backend: Any = None,
    job_type: str = "STREAMING",
) -> OperatorContext:
    """Subtask 0 of 1, keyed by the record's first field, on a heap backend unless one is given."""
    return OperatorContext(
        job_id="job",
        task_name="task",
        operator_name=operator_name,
        subtask=0,
        parallelism=1,
        max_parallelism=128,
        attempt=0,
        job_type=job_type,
        metrics=TaskIOMetrics(),
        key_selector=lambda e: e[0],
        keyed_backend=backend if backend is not None else HeapKeyedStateBackend(128),
        clock=clock,
    )
