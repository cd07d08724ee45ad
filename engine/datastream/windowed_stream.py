"""``WindowedStream``: ``key_by(...).window(assigner)`` and what can follow it.

Besides the objects themselves, each window operator carries a
``WindowDescriptor`` naming its assigner, effective trigger and evictor, so
the JobGraph can be judged (for instance by the Spark validator) without
unpickling user code.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from millstream.engine.common.time import Duration, Time
from millstream.engine.datastream.functions import AggregateFunction, ProcessWindowFunction, ReduceFunction, WindowFunction
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.graph.transformations import OperatorKind, WindowDescriptor, type_name
from millstream.engine.windowing.assigners import GlobalWindows, WindowAssigner
from millstream.engine.windowing.evictors import Evictor
from millstream.engine.windowing.triggers import PurgingTrigger, Trigger
from millstream.engine.windowing.user_assigners import adapt_assigner

if TYPE_CHECKING:
    from millstream.engine.datastream.data_stream import DataStream, KeyedStream


class WindowedStream:
    """``key_by(...).window(assigner)``: per-key windows, then a window function."""

    def __init__(self, keyed: "KeyedStream", assigner: WindowAssigner) -> None:
        if not isinstance(assigner, WindowAssigner):
            raise TypeError(f"window() expects a WindowAssigner, got {type(assigner).__name__}")
        self._keyed = keyed
        # An assigner written for PyFlink (assign_windows with a context...) speaks Millstream's protocol from here on.
        self._assigner = adapt_assigner(assigner)
        self._trigger: Trigger | None = None
        self._evictor: Evictor | None = None
        self._lateness = 0
        self._late_tag: str | None = None

    def get_execution_environment(self) -> Any:
        return self._keyed._env

    def get_input_type(self) -> Any:
        return self._keyed.get_type()

    def trigger(self, trigger: Trigger) -> "WindowedStream":
        if self._assigner.is_merging and not trigger.can_merge():
            raise TypeError(f"{type(trigger).__name__} cannot be used with merging (session) windows")
        self._trigger = trigger
        return self

    def evictor(self, evictor: Evictor) -> "WindowedStream":
        self._evictor = evictor
        return self

    def allowed_lateness(self, time_ms: int | Time | Duration) -> "WindowedStream":
        ms = time_ms if isinstance(time_ms, int) else time_ms.to_milliseconds()
        if ms < 0:
            raise ValueError(f"allowed lateness must not be negative, got {ms} ms")
        self._lateness = ms
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> "WindowedStream":
        self._late_tag = output_tag.tag_id
        return self

    def _build(
        self, kind: str, function: Any, window_function: Any = None, label: str = "", output_type: Any = None
    ) -> "DataStream":
        assigner = getattr(self._assigner, "user", self._assigner)
        name = f"Window({type(assigner).__name__}, {label or type(function).__name__})"
        func_desc = _user_type(function) + (f", {_user_type(window_function)}" if window_function is not None else "")
        return self._keyed._op(
            OperatorKind.WINDOW,
            name,
            function,
            output_type,
            assigner=self._assigner,
            trigger=self._trigger,
            evictor=self._evictor,
            allowed_lateness=self._lateness,
            late_tag=self._late_tag,
            function_kind=kind,
            window_function=window_function,
            window_descriptor=describe_window(self._assigner, self._trigger, self._evictor, kind),
            # The execution plan shows the node as PyFlink names and describes it.
            plan_name=type(assigner).__name__,
            plan_description=f"{self._plan_kind}({assigner!r}, {self._trigger_name()}, {func_desc})",
        )

    _plan_kind = "Window"  # "AllWindow" for window_all

    def _trigger_name(self) -> str:
        """The trigger's class name as PyFlink's plan gives it (its default trigger when none is set)."""
        if self._trigger is not None:
            return type(getattr(self._trigger, "user", self._trigger)).__name__
        named = getattr(self._assigner, "pyflink_default_trigger", None)
        if named:
            return named
        try:
            return type(self._assigner.get_default_trigger()).__name__
        except Exception:  # a user assigner's own default trigger may need what PyFlink passes it
            return "Trigger"

    def reduce(self, reduce_function: ReduceFunction | Any, window_function: Any = None, output_type: Any = None) -> "DataStream":
        if not (isinstance(reduce_function, ReduceFunction) or callable(reduce_function)):
            raise TypeError("reduce expects a ReduceFunction or a callable")
        if output_type is None and window_function is None:
            output_type = self._keyed._origin.get_type()  # PyFlink: a plain window reduce keeps its input's type
        return self._build("reduce", reduce_function, window_function, "ReduceFunction", output_type)

    def aggregate(
        self,
        aggregate_function: AggregateFunction,
        window_function: Any = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> "DataStream":
        if not isinstance(aggregate_function, AggregateFunction):
            raise TypeError(f"aggregate expects an AggregateFunction, got {type(aggregate_function).__name__}")
        return self._build(
            "aggregate", aggregate_function, window_function, type(aggregate_function).__name__, output_type
        )

    def process(self, function: ProcessWindowFunction, output_type: Any = None) -> "DataStream":
        if not isinstance(function, ProcessWindowFunction):
            raise TypeError(f"process expects a ProcessWindowFunction, got {type(function).__name__}")
        return self._build("process", function, output_type=output_type)

    def apply(self, window_function: WindowFunction, output_type: Any = None) -> "DataStream":
        if not isinstance(window_function, WindowFunction):
            raise TypeError(f"apply expects a WindowFunction, got {type(window_function).__name__}")
        return self._build("apply", window_function, output_type=output_type)


def _user_type(function: Any) -> str:
    """The class name of the user's function (through window_all's adapters); "function" for a lambda."""
    return type(getattr(function, "user_function", function)).__name__


def describe_window(
    assigner: WindowAssigner, trigger: Trigger | None, evictor: Evictor | None, function_kind: str
) -> WindowDescriptor:
    """The class names a window operator is made of; the trigger is the one that will really run."""
    effective = trigger if trigger is not None else assigner.get_default_trigger()
    chain = [type_name(effective)]
    while isinstance(effective, PurgingTrigger):  # PurgingTrigger.of(CountTrigger.of(n)) is still a count trigger
        effective = effective.nested
        chain.append(type_name(effective))
    return WindowDescriptor(
        assigner=type_name(assigner),
        event_time=bool(assigner.is_event_time),
        merging=bool(assigner.is_merging),
        global_windows=isinstance(assigner, GlobalWindows) or getattr(assigner, "counts_elements", False),
        trigger=tuple(chain),
        evictor=type_name(evictor) if evictor is not None else None,
        function_kind=function_kind,
    )
