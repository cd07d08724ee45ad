"""``AllWindowedStream``: ``window_all(assigner)``, windows over a whole (non-keyed) stream.

As in PyFlink, the stream is keyed by a constant (``NullByteKeySelector``) and the
window operator runs at the default parallelism like any keyed window (so one of its
subtasks, the one owning the constant key, sees every record; Java Flink forces
parallelism 1 instead, PyFlink does not); the keyless ProcessAllWindowFunction
and AllWindowFunction run behind adapters that drop the key, so the keyed
window operators (native and Spark) run them unchanged.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from millstream.engine.common.time import Duration, Time
from millstream.engine.datastream.functions import (
    AggregateFunction,
    AllWindowFunction,
    NullByteKeySelector,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    ReduceFunction,
    WindowFunction,
)
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.datastream.windowed_stream import WindowedStream
from millstream.engine.windowing.assigners import WindowAssigner
from millstream.engine.windowing.evictors import Evictor
from millstream.engine.windowing.triggers import Trigger

if TYPE_CHECKING:
    from millstream.engine.datastream.data_stream import DataStream


class _AllWindowContext(ProcessAllWindowFunction.Context):
    """A ProcessAllWindowFunction's view of the keyed window context underneath (its key is constant)."""

    def __init__(self, inner: ProcessWindowFunction.Context) -> None:
        self._inner = inner

    def window(self) -> Any:
        return self._inner.window()

    def current_processing_time(self) -> int:
        return self._inner.current_processing_time()

    def current_watermark(self) -> int:
        return self._inner.current_watermark()

    def window_state(self) -> Any:
        return self._inner.window_state()

    def global_state(self) -> Any:
        return self._inner.global_state()


class _ProcessAllWindowAdapter(ProcessWindowFunction):
    """Runs a ProcessAllWindowFunction as the keyed operator's ProcessWindowFunction, dropping the key."""

    def __init__(self, function: ProcessAllWindowFunction) -> None:
        self.function = function

    @property
    def user_function(self) -> Any:
        return self.function

    def open(self, runtime_context: Any) -> None:
        self.function.open(runtime_context)

    def close(self) -> None:
        self.function.close()

    def process(self, key: Any, context: ProcessWindowFunction.Context, elements: Any) -> Any:
        return self.function.process(_AllWindowContext(context), elements)

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        self.function.clear(_AllWindowContext(context))


class _AllWindowFunctionAdapter(WindowFunction):
    """Runs an AllWindowFunction as a WindowFunction, dropping the key."""

    def __init__(self, function: AllWindowFunction) -> None:
        self.function = function

    @property
    def user_function(self) -> Any:
        return self.function

    def open(self, runtime_context: Any) -> None:
        self.function.open(runtime_context)

    def close(self) -> None:
        self.function.close()

    def apply(self, key: Any, window: Any, inputs: Any) -> Any:
        return self.function.apply(window, inputs)


def _adapt_all(window_function: Any) -> Any:
    """A window_all window function in the keyed operator's terms (None stays None)."""
    if window_function is None:
        return None
    if isinstance(window_function, ProcessAllWindowFunction):
        return _ProcessAllWindowAdapter(window_function)
    if isinstance(window_function, AllWindowFunction):
        return _AllWindowFunctionAdapter(window_function)
    raise TypeError(
        "a window_all window function must be a ProcessAllWindowFunction or an AllWindowFunction, "
        f"got {type(window_function).__name__}"
    )


class AllWindowedStream:
    """Windows over the whole stream, evaluated by the one subtask that owns the constant key; triggers, evictors, lateness and
    late side output behave exactly as for keyed windows."""

    def __init__(self, stream: "DataStream", assigner: WindowAssigner) -> None:
        self._windowed = WindowedStream(stream.key_by(NullByteKeySelector()), assigner)
        self._windowed._plan_kind = "AllWindow"

    def trigger(self, trigger: Trigger) -> "AllWindowedStream":
        self._windowed.trigger(trigger)
        return self

    def evictor(self, evictor: Evictor) -> "AllWindowedStream":
        self._windowed.evictor(evictor)
        return self

    def allowed_lateness(self, time_ms: int | Time | Duration) -> "AllWindowedStream":
        self._windowed.allowed_lateness(time_ms)
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> "AllWindowedStream":
        self._windowed.side_output_late_data(output_tag)
        return self

    def reduce(self, reduce_function: ReduceFunction | Any, window_function: Any = None, output_type: Any = None) -> "DataStream":
        return self._windowed.reduce(reduce_function, _adapt_all(window_function), output_type)

    def aggregate(
        self,
        aggregate_function: AggregateFunction,
        window_function: Any = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> "DataStream":
        return self._windowed.aggregate(aggregate_function, _adapt_all(window_function), accumulator_type, output_type)

    def process(self, process_window_function: ProcessAllWindowFunction, output_type: Any = None) -> "DataStream":
        if not isinstance(process_window_function, ProcessAllWindowFunction):
            raise TypeError(
                f"AllWindowedStream.process expects a ProcessAllWindowFunction, got {type(process_window_function).__name__}"
            )
        return self._windowed.process(_ProcessAllWindowAdapter(process_window_function), output_type)

    def apply(self, all_window_function: AllWindowFunction, output_type: Any = None) -> "DataStream":
        if not isinstance(all_window_function, AllWindowFunction):
            raise TypeError(f"AllWindowedStream.apply expects an AllWindowFunction, got {type(all_window_function).__name__}")
        return self._windowed.apply(_AllWindowFunctionAdapter(all_window_function), output_type)
