"""Triggers decide when a window's contents are emitted (Flink's semantics, PyFlink's names).

A trigger talks to its window through a ``TriggerContext`` supplied by the
window operator: the watermark, the clock, timers and small per-window state.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import Any, Protocol


class TriggerResult(Enum):
    CONTINUE = (False, False)
    FIRE = (True, False)
    PURGE = (False, True)
    FIRE_AND_PURGE = (True, True)

    @property
    def is_fire(self) -> bool:
        return self.value[0]

    @property
    def is_purge(self) -> bool:
        return self.value[1]


class TriggerContext(Protocol):
    def current_watermark(self) -> int: ...

    def current_processing_time(self) -> int: ...

    def register_event_time_timer(self, ts: int) -> None: ...

    def delete_event_time_timer(self, ts: int) -> None: ...

    def register_processing_time_timer(self, ts: int) -> None: ...

    def delete_processing_time_timer(self, ts: int) -> None: ...

    def get_state(self, name: str) -> Any: ...

    def set_state(self, name: str, value: Any) -> None: ...


class _PyFlinkTriggerContext(ABC):
    """PyFlink's ``Trigger.TriggerContext``: what a trigger written for PyFlink calls. The window
    operator's context has these names beside Millstream's own (``current_watermark``...)."""

    @abstractmethod
    def get_current_processing_time(self) -> int: ...

    @abstractmethod
    def get_current_watermark(self) -> int: ...

    @abstractmethod
    def register_processing_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def register_event_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def delete_processing_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def delete_event_time_timer(self, time: int) -> None: ...

    @abstractmethod
    def get_partitioned_state(self, state_descriptor: Any) -> Any:
        """Value, list, reducing or aggregating state of this key and window."""

    def get_metric_group(self) -> Any:
        from millstream.engine.metrics.groups import UnregisteredMetricGroup

        return UnregisteredMetricGroup()


class _PyFlinkOnMergeContext(_PyFlinkTriggerContext):
    @abstractmethod
    def merge_partitioned_state(self, state_descriptor: Any) -> None:
        """Fold the merged windows' state of this descriptor into the merged window's."""


class Trigger:
    TriggerContext = _PyFlinkTriggerContext
    OnMergeContext = _PyFlinkOnMergeContext

    def on_element(self, element: Any, timestamp: int, window: Any, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Any, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Any, ctx: TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return False

    def on_merge(self, window: Any, ctx: TriggerContext) -> None:
        raise TypeError(f"{type(self).__name__} cannot be used with merging (session) windows")

    def clear(self, window: Any, ctx: TriggerContext) -> None:
        pass


class EventTimeTrigger(Trigger):
    """Fires once the watermark passes the end of the window."""

    @staticmethod
    def create() -> "EventTimeTrigger":
        return EventTimeTrigger()

    def on_element(self, element, timestamp, window, ctx):
        if window.max_timestamp() <= ctx.current_watermark():
            return TriggerResult.FIRE  # late but within allowed lateness: fire right away
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx):
        if window.max_timestamp() > ctx.current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window, ctx):
        ctx.delete_event_time_timer(window.max_timestamp())


class ProcessingTimeTrigger(Trigger):
    @staticmethod
    def create() -> "ProcessingTimeTrigger":
        return ProcessingTimeTrigger()

    def on_element(self, element, timestamp, window, ctx):
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        return TriggerResult.FIRE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx):
        if window.max_timestamp() > ctx.current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window, ctx):
        ctx.delete_processing_time_timer(window.max_timestamp())


class CountTrigger(Trigger):
    """Fires every ``count`` elements of a window."""

    def __init__(self, count: int) -> None:
        if count <= 0:
            raise ValueError(f"count must be positive, got {count}")
        self.count = count

    @staticmethod
    def of(count: int) -> "CountTrigger":
        return CountTrigger(count)

    def on_element(self, element, timestamp, window, ctx):
        n = (ctx.get_state("count") or 0) + 1
        if n >= self.count:
            ctx.set_state("count", 0)
            return TriggerResult.FIRE
        ctx.set_state("count", n)
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx):
        pass  # the operator sums the merged windows' counts

    def clear(self, window, ctx):
        ctx.set_state("count", None)


class _FireTimeState:
    """The continuous triggers' next fire time as PyFlink's ``ReducingState`` (reduced with ``min``),
    kept in the trigger slot "fire" they have always used, so savepoints taken before stay readable."""

    def __init__(self, ctx: TriggerContext) -> None:
        self._ctx = ctx

    def get(self) -> int | None:
        return self._ctx.get_state("fire")

    def add(self, value: int) -> None:
        current = self.get()
        self._ctx.set_state("fire", value if current is None else min(current, value))

    def clear(self) -> None:
        self._ctx.set_state("fire", None)


class ContinuousEventTimeTrigger(Trigger):
    """Fires every ``interval`` of event time while the window is open, and at its end."""

    def __init__(self, interval: int) -> None:
        self.interval = interval

    @staticmethod
    def of(interval: Any) -> "ContinuousEventTimeTrigger":
        return ContinuousEventTimeTrigger(interval if isinstance(interval, int) else interval.to_milliseconds())

    def on_element(self, element, timestamp, window, ctx):
        if window.max_timestamp() <= ctx.current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        fire = _FireTimeState(ctx)
        if fire.get() is None:
            self.register_next_fire_timestamp(timestamp - (timestamp % self.interval), window, ctx, fire)
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        fire = _FireTimeState(ctx)
        if fire.get() == time:
            fire.clear()
            self.register_next_fire_timestamp(time, window, ctx, fire)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def clear(self, window, ctx):
        fire = _FireTimeState(ctx)
        if fire.get() is not None:
            ctx.delete_event_time_timer(fire.get())
        fire.clear()
        ctx.delete_event_time_timer(window.max_timestamp())

    def register_next_fire_timestamp(self, time: int, window: Any, ctx: Any, fire_timestamp_state: Any) -> None:
        """PyFlink's (and Flink's) hook: schedule the next fire one interval after ``time``, never past
        the window's end (that fire is the window's own), and remember it in ``fire_timestamp_state``.
        The built-in methods call it, so a subclass that overrides it changes the schedule, as in PyFlink."""
        next_fire = min(time + self.interval, window.max_timestamp())
        fire_timestamp_state.add(next_fire)
        ctx.register_event_time_timer(next_fire)


class PurgingTrigger(Trigger):
    """Turns every FIRE of the wrapped trigger into FIRE_AND_PURGE."""

    def __init__(self, nested: Trigger) -> None:
        self.nested = nested

    @staticmethod
    def of(nested: Trigger) -> "PurgingTrigger":
        return PurgingTrigger(nested)

    @staticmethod
    def _purge(r: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if r.is_fire else r

    def on_element(self, element, timestamp, window, ctx):
        return self._purge(self.nested.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time, window, ctx):
        return self._purge(self.nested.on_event_time(time, window, ctx))

    def on_processing_time(self, time, window, ctx):
        return self._purge(self.nested.on_processing_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested.can_merge()

    def on_merge(self, window, ctx):
        self.nested.on_merge(window, ctx)

    def clear(self, window, ctx):
        self.nested.clear(window, ctx)


class NeverTrigger(Trigger):
    """GlobalWindows' default: nothing fires unless a trigger is set."""


class ContinuousProcessingTimeTrigger(Trigger):
    """Fires every ``interval`` of processing time while the window holds elements (Flink's rule:
    the first fire is at the next interval boundary after the first element, never past the window's end)."""

    def __init__(self, interval: int) -> None:
        if interval <= 0:
            raise ValueError(f"the trigger interval must be positive, got {interval} ms")
        self.interval = interval

    @staticmethod
    def of(interval: Any) -> "ContinuousProcessingTimeTrigger":
        return ContinuousProcessingTimeTrigger(interval if isinstance(interval, int) else interval.to_milliseconds())

    def register_next_fire_timestamp(self, time: int, window: Any, ctx: Any, fire_timestamp_state: Any) -> None:
        """PyFlink's (and Flink's) hook: schedule the next fire one interval after ``time``, never past
        the window's end, and remember it in ``fire_timestamp_state``. The built-in methods call it,
        so a subclass that overrides it changes the schedule, as in PyFlink."""
        next_fire = min(time + self.interval, window.max_timestamp())
        fire_timestamp_state.add(next_fire)
        ctx.register_processing_time_timer(next_fire)

    def on_element(self, element, timestamp, window, ctx):
        fire = _FireTimeState(ctx)
        if fire.get() is None:
            now = ctx.current_processing_time()
            self.register_next_fire_timestamp(now - (now % self.interval), window, ctx, fire)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        fire = _FireTimeState(ctx)
        if fire.get() == time:
            fire.clear()
            self.register_next_fire_timestamp(time, window, ctx, fire)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx):
        fire = ctx.get_state("fire")
        if fire is not None and fire <= window.max_timestamp():
            ctx.register_processing_time_timer(fire)

    def clear(self, window, ctx):
        fire = ctx.get_state("fire")
        if fire is not None:
            ctx.delete_processing_time_timer(fire)
        ctx.set_state("fire", None)
