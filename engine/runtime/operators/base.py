"""The operator contract and the context an operator runs in.

Operators receive whole batches (values plus optional timestamps) and must not
mutate the lists they are given, because one batch may feed several outputs.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from millstream.engine.datastream.functions import Function, RuntimeContext
from millstream.engine.metrics import MetricGroup
from millstream.engine.runtime.collect import CollectGateway
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend, StateTypeMismatch
from millstream.engine.runtime.task_metrics import TaskIOMetrics


class Output(Protocol):
    def emit(self, values: list[Any], timestamps: list[int] | None) -> None: ...

    def emit_watermark(self, watermark: int) -> None: ...

    def emit_status(self, idle: bool) -> None:
        """Tell downstream this stream is idle (left out of watermark minimums) or active again."""


class FanOut:
    """Sends each batch to every downstream: chained operators and record writers."""

    def __init__(self, outputs: list[Output]) -> None:
        self.outputs = outputs

    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        for o in self.outputs:
            o.emit(values, timestamps)

    def emit_watermark(self, watermark: int) -> None:
        for o in self.outputs:
            o.emit_watermark(watermark)

    def emit_status(self, idle: bool) -> None:
        for o in self.outputs:
            o.emit_status(idle)


class ChainingOutput:
    """Hands a batch straight to the next operator of the chain: no copy, no serialization."""

    def __init__(self, operator: "StreamOperator") -> None:
        self.operator = operator

    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        self.operator.process_batch(values, timestamps)

    def emit_watermark(self, watermark: int) -> None:
        self.operator.process_watermark(watermark)

    def emit_status(self, idle: bool) -> None:
        self.operator.process_status(idle)


class Discard:
    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        pass

    def emit_watermark(self, watermark: int) -> None:
        pass

    def emit_status(self, idle: bool) -> None:
        pass


@dataclass
class OperatorContext:
    job_id: str
    task_name: str
    operator_name: str
    subtask: int
    parallelism: int
    max_parallelism: int
    attempt: int
    job_type: str
    metrics: TaskIOMetrics
    print_line: Callable[[str], None] = print
    collect: CollectGateway | None = None  # where a collect sink sends its results
    key_selector: Callable[[Any], Any] | None = None
    key_selector2: Callable[[Any], Any] | None = None  # a two-input operator's second input
    keyed_backend: HeapKeyedStateBackend | None = None
    job_parameters: dict[str, str] = field(default_factory=dict)
    clock: Callable[[], int] = field(default=lambda: int(time.time() * 1000))  # processing time, ms

    @property
    def is_batch(self) -> bool:
        return self.job_type == "BATCH"


class StreamingRuntimeContext(RuntimeContext):
    def __init__(self, ctx: OperatorContext) -> None:
        self._ctx = ctx

    def get_task_name(self) -> str:
        return self._ctx.task_name

    def get_number_of_parallel_subtasks(self) -> int:
        return self._ctx.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._ctx.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._ctx.subtask

    def get_attempt_number(self) -> int:
        return self._ctx.attempt

    def get_job_parameter(self, key: str, default_value: str | None = None) -> str | None:
        return self._ctx.job_parameters.get(key, default_value)

    def get_metrics_group(self) -> MetricGroup:
        """The operator's metric group: what is registered there is reported with the task's metrics."""
        return self._ctx.metrics.user_metrics.operator_group(self._ctx.operator_name)

    def _backend(self) -> HeapKeyedStateBackend:
        if self._ctx.keyed_backend is None:
            raise TypeError(
                f"keyed state is only available on a keyed stream; '{self._ctx.operator_name}' is not keyed"
            )
        return self._ctx.keyed_backend

    def _state(self, getter: str, descriptor: Any) -> Any:
        try:
            return getattr(self._backend(), getter)(descriptor)
        except StateTypeMismatch as e:
            raise StateTypeMismatch(f"in '{self._ctx.operator_name}': {e}") from None

    def get_state(self, state_descriptor):
        return self._state("get_state", state_descriptor)

    def get_list_state(self, state_descriptor):
        return self._state("get_list_state", state_descriptor)

    def get_map_state(self, state_descriptor):
        return self._state("get_map_state", state_descriptor)

    def get_reducing_state(self, state_descriptor):
        return self._state("get_reducing_state", state_descriptor)

    def get_aggregating_state(self, state_descriptor):
        return self._state("get_aggregating_state", state_descriptor)


class StreamOperator:
    """Base operator: forwards watermarks, does nothing at end of input."""

    #: operators that need ``on_tick`` (processing-time timers, idleness) set this
    wants_ticks = False

    def __init__(self, function: Any, ctx: OperatorContext, params: dict[str, Any]) -> None:
        self.function = function
        self.ctx = ctx
        self.params = params
        self.output: Output = Discard()
        self.side_outputs: dict[str, Output] = {}

    def open(self) -> None:
        if isinstance(self.function, Function):
            self.function.open(StreamingRuntimeContext(self.ctx))

    def process_batch(self, values: list[Any], timestamps: list[int] | None) -> None:
        raise NotImplementedError

    def process_batch2(self, values: list[Any], timestamps: list[int] | None) -> None:
        raise TypeError(f"'{self.ctx.operator_name}' has one input")

    def process_watermark(self, watermark: int) -> None:
        self.output.emit_watermark(watermark)

    def process_status(self, idle: bool) -> None:
        self.output.emit_status(idle)

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Just before the checkpoint's snapshot and barrier: the last moment to emit records or stage
        output (a two-phase-commit sink's pre-commit) that the checkpoint should cover."""

    def snapshot_state(self) -> Any:
        """Operator state beyond keyed state and timers (broadcast state, a sink's staged output...):
        plain picklable data. On restore at another parallelism a **list** is operator list state: the
        lists of all old subtasks are concatenated and split evenly; anything else is taken as the same
        on every subtask (broadcast state) and each new subtask gets one old subtask's copy."""
        return None

    def restore_state(self, state: Any) -> None:
        """The inverse of ``snapshot_state``, called after ``open`` (None: nothing to restore)."""

    def initialized(self) -> None:
        """After ``open`` and any restore, before the first record or barrier (Flink's operators are
        open and their state initialised at this point too)."""

    def timer_services(self) -> dict[str, Any]:
        """The keyed operator's InternalTimerServices by name: the task snapshots their timers inside
        the keyed state, by key group, and restores each key group's timers where the key group goes."""
        return {}

    def keyed_tables(self) -> dict[str, tuple[str, Any]]:
        """Keyed state the operator holds outside its backend, as ``{state name: (kind, (key, value)
        pairs)}``: checkpointed by key group with the backend's tables, and restored into the backend
        table of that name (where ``restore_state`` finds it)."""
        return {}

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """The checkpoint is complete everywhere: the commit point of two-phase-commit sinks."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """The checkpoint will never complete: whatever was staged for it will not be committed by it."""

    def on_tick(self, now_ms: int) -> None:
        """Called every few tens of milliseconds by the task loop when ``wants_ticks``."""

    def emit_side(self, tag_id: str, values: list[Any], timestamps: list[int] | None) -> None:
        out = self.side_outputs.get(tag_id)
        if out is not None:  # a side output nobody consumes is dropped, as in Flink
            out.emit(values, timestamps)

    def end_input(self) -> None:
        pass

    def stop_without_drain(self) -> None:
        """Stop-with-savepoint without drain ends the task instead of ``end_input``: the job will resume
        from the savepoint, so operators holding windows or timers leave them pending there unfired
        (Flink calls finish() but not endInput()). Others finish as at the end of their input."""
        self.end_input()

    def close(self) -> None:
        if isinstance(self.function, Function):
            self.function.close()
