"""Dynamic session gaps, ContinuousProcessingTimeTrigger and the Window/MergingWindowAssigner bases."""
from __future__ import annotations

from typing import Any

import pytest

from millstream.engine.windowing.assigners import (
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    MergingWindowAssigner,
    ProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
)
from millstream.engine.windowing.triggers import ContinuousProcessingTimeTrigger, TriggerResult
from millstream.engine.windowing.windows import TimeWindow


class Gap(SessionWindowTimeGapExtractor):
    def extract(self, element: Any) -> int:
        return element[1]


def test_with_dynamic_gap_gives_the_dynamic_assigner_of_the_same_time_domain():
    ev = EventTimeSessionWindows.with_dynamic_gap(Gap())
    pt = ProcessingTimeSessionWindows.with_dynamic_gap(Gap())
    assert isinstance(ev, DynamicEventTimeSessionWindows) and ev.is_event_time
    assert isinstance(pt, DynamicProcessingTimeSessionWindows) and not pt.is_event_time
    assert isinstance(ev, MergingWindowAssigner) and ev.is_merging
    assert ev.assign_windows(("a", 300), 1000) == [TimeWindow(1000, 1300)]
    assert DynamicEventTimeSessionWindows.with_dynamic_gap(lambda e: 5).assign_windows("x", 0) == [TimeWindow(0, 5)]
    with pytest.raises(ValueError, match="must be positive"):
        ev.assign_windows(("a", 0), 1000)
    with pytest.raises(TypeError):
        DynamicEventTimeSessionWindows(42)


class Ctx:
    def __init__(self, now: int) -> None:
        self.now = now
        self.timers: set[int] = set()
        self.state: dict[str, Any] = {}

    def current_processing_time(self) -> int:
        return self.now

    def register_processing_time_timer(self, ts: int) -> None:
        self.timers.add(ts)

    def delete_processing_time_timer(self, ts: int) -> None:
        self.timers.discard(ts)

    def get_state(self, name: str) -> Any:
        return self.state.get(name)

    def set_state(self, name: str, value: Any) -> None:
        if value is None:
            self.state.pop(name, None)
        else:
            self.state[name] = value


def test_continuous_processing_time_trigger_fires_every_interval_until_the_window_ends():
    t = ContinuousProcessingTimeTrigger.of(100)
    w = TimeWindow(0, 350)
    ctx = Ctx(now=130)
    assert t.on_element("x", 0, w, ctx) is TriggerResult.CONTINUE
    assert ctx.timers == {200}  # the next interval boundary after the first element
    assert t.on_element("y", 0, w, ctx) is TriggerResult.CONTINUE and ctx.timers == {200}
    assert t.on_processing_time(200, w, ctx) is TriggerResult.FIRE
    assert 300 in ctx.timers
    assert t.on_processing_time(300, w, ctx) is TriggerResult.FIRE
    assert 349 in ctx.timers  # never past the window's last timestamp
    assert t.on_processing_time(250, w, ctx) is TriggerResult.CONTINUE
    assert t.on_event_time(300, w, ctx) is TriggerResult.CONTINUE
    t.clear(w, ctx)
    assert 349 not in ctx.timers and ctx.state == {}
    assert t.can_merge()
    with pytest.raises(ValueError):
        ContinuousProcessingTimeTrigger.of(0)


def test_continuous_processing_time_trigger_schedules_through_pyflinks_hook():
    # A subclass overriding register_next_fire_timestamp (PyFlink's signature) sets the schedule.
    class EveryTenth(ContinuousProcessingTimeTrigger):
        def register_next_fire_timestamp(self, time, window, ctx, fire_timestamp_state):
            nxt = min(time + 10, window.max_timestamp())
            fire_timestamp_state.add(nxt)
            ctx.register_processing_time_timer(nxt)

    t, w, ctx = EveryTenth(100), TimeWindow(0, 350), Ctx(now=130)
    t.on_element("x", 0, w, ctx)
    assert ctx.timers == {110}
    assert t.on_processing_time(110, w, ctx) is TriggerResult.FIRE
    assert 120 in ctx.timers
