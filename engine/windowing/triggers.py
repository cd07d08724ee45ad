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
        if ctx.get_state("fire") is None:
            start = timestamp - (timestamp % self.interval)
            nxt = start + self.interval
            ctx.register_event_time_timer(nxt)
            ctx.set_state("fire", nxt)
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        if ctx.get_state("fire") == time:
            nxt = time + self.interval
            ctx.register_event_time_timer(nxt)
            ctx.set_state("fire", nxt)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def clear(self, window, ctx):
        fire = ctx.get_state("fire")
        if fire is not None:
            ctx.delete_event_time_timer(fire)
        ctx.set_state("fire", None)
        ctx.delete_event_time_timer(window.max_timestamp())


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

    def _register_next(self, time: int, window: Any, ctx: TriggerContext) -> None:
        nxt = min(time + self.interval, window.max_timestamp())
        ctx.register_processing_time_timer(nxt)
        ctx.set_state("fire", nxt)

    def on_element(self, element, timestamp, window, ctx):
        if ctx.get_state("fire") is None:
            now = ctx.current_processing_time()
            self._register_next(now - (now % self.interval), window, ctx)
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        if ctx.get_state("fire") == time:
            self._register_next(time, window, ctx)
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
