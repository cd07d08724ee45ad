"""Triggers driven through a tiny fake TriggerContext: what each returns and which timers it leaves behind."""
from __future__ import annotations

from typing import Any

import pytest

from millstream.engine.common.time import Time
from millstream.engine.windowing.triggers import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerResult,
)
from millstream.engine.windowing.windows import GlobalWindow, TimeWindow

C, F, P, FP = TriggerResult.CONTINUE, TriggerResult.FIRE, TriggerResult.PURGE, TriggerResult.FIRE_AND_PURGE
W = TimeWindow(0, 1000)


class FakeTriggerContext:
    def __init__(self, watermark: int = -(2**63), now: int = 0) -> None:
        self.watermark = watermark
        self.now = now
        self.event_timers: set[int] = set()
        self.processing_timers: set[int] = set()
        self.state: dict[str, Any] = {}

    def current_watermark(self) -> int:
        return self.watermark

    def current_processing_time(self) -> int:
        return self.now

    def register_event_time_timer(self, ts: int) -> None:
        self.event_timers.add(ts)

    def delete_event_time_timer(self, ts: int) -> None:
        self.event_timers.discard(ts)

    def register_processing_time_timer(self, ts: int) -> None:
        self.processing_timers.add(ts)

    def delete_processing_time_timer(self, ts: int) -> None:
        self.processing_timers.discard(ts)

    def get_state(self, name: str) -> Any:
        return self.state.get(name)

    def set_state(self, name: str, value: Any) -> None:
        if value is None:
            self.state.pop(name, None)
        else:
            self.state[name] = value


def test_trigger_result_flags():
    assert [(r.is_fire, r.is_purge) for r in (C, F, P, FP)] == [(False, False), (True, False), (False, True), (True, True)]


# -- EventTimeTrigger -------------------------------------------------------------------


def test_event_time_trigger_registers_the_window_end_and_fires_only_there():
    t, ctx = EventTimeTrigger.create(), FakeTriggerContext(watermark=100)
    assert t.on_element("e", 10, W, ctx) is C
    assert ctx.event_timers == {999}
    assert t.on_event_time(500, W, ctx) is C
    assert t.on_event_time(999, W, ctx) is F
    assert t.on_processing_time(999, W, ctx) is C


def test_event_time_trigger_fires_at_once_when_the_window_is_already_behind_the_watermark():
    t = EventTimeTrigger.create()
    behind = FakeTriggerContext(watermark=999)
    assert t.on_element("late", 10, W, behind) is F
    assert behind.event_timers == set()  # no timer for a window that is already due
    just_before = FakeTriggerContext(watermark=998)
    assert t.on_element("e", 10, W, just_before) is C


def test_event_time_trigger_merges_and_clears():
    t = EventTimeTrigger.create()
    assert t.can_merge()
    ctx = FakeTriggerContext(watermark=500)
    t.on_merge(W, ctx)
    assert ctx.event_timers == {999}
    t.clear(W, ctx)
    assert ctx.event_timers == set()
    behind = FakeTriggerContext(watermark=999)
    t.on_merge(W, behind)
    assert behind.event_timers == set()


# -- ProcessingTimeTrigger --------------------------------------------------------------


def test_processing_time_trigger():
    t, ctx = ProcessingTimeTrigger.create(), FakeTriggerContext(now=10)
    assert t.on_element("e", 10, W, ctx) is C
    assert ctx.processing_timers == {999}
    assert t.on_event_time(999, W, ctx) is C
    assert t.on_processing_time(999, W, ctx) is F
    t.clear(W, ctx)
    assert ctx.processing_timers == set()
    assert t.can_merge()
    late = FakeTriggerContext(now=999)
    t.on_merge(W, late)
    assert late.processing_timers == set()
    early = FakeTriggerContext(now=998)
    t.on_merge(W, early)
    assert early.processing_timers == {999}


# -- CountTrigger -----------------------------------------------------------------------


def test_count_trigger_fires_every_n_elements_and_restarts():
    t, ctx = CountTrigger.of(3), FakeTriggerContext()
    results = [t.on_element(i, 0, GlobalWindow(), ctx) for i in range(7)]
    assert results == [C, C, F, C, C, F, C]
    assert ctx.get_state("count") == 1
    assert t.on_event_time(0, GlobalWindow(), ctx) is C
    assert t.on_processing_time(0, GlobalWindow(), ctx) is C
    t.clear(GlobalWindow(), ctx)
    assert ctx.state == {}


def test_count_of_one_fires_on_every_element():
    t, ctx = CountTrigger.of(1), FakeTriggerContext()
    assert [t.on_element(i, 0, W, ctx) for i in range(3)] == [F, F, F]


@pytest.mark.parametrize("n", [0, -2])
def test_count_trigger_needs_a_positive_count(n):
    with pytest.raises(ValueError, match="count must be positive"):
        CountTrigger.of(n)


def test_count_trigger_continues_from_a_merged_count():
    # The window operator sums the merged windows' counts into the state before on_element.
    t, ctx = CountTrigger.of(4), FakeTriggerContext()
    assert t.can_merge()
    ctx.set_state("count", 3)
    t.on_merge(W, ctx)
    assert t.on_element("e", 0, W, ctx) is F


# -- ContinuousEventTimeTrigger ---------------------------------------------------------


def test_continuous_trigger_fires_at_interval_boundaries_and_at_window_end():
    t, ctx = ContinuousEventTimeTrigger.of(Time.milliseconds(300)), FakeTriggerContext(watermark=0)
    assert t.on_element("e", 10, W, ctx) is C
    assert ctx.event_timers == {300, 999}
    assert t.on_element("e", 250, W, ctx) is C  # the pending boundary is kept
    assert ctx.event_timers == {300, 999}

    fired = []
    for time in (300, 600, 900):
        assert time in ctx.event_timers
        fired.append(t.on_event_time(time, W, ctx))
    assert fired == [F, F, F]
    # As in PyFlink and Flink: the fire after 900 would be at 1200, past the window, so it is the
    # window's end instead (one fire there, not a second one for a window already emitted).
    assert ctx.get_state("fire") == 999 and 1200 not in ctx.event_timers
    assert t.on_event_time(999, W, ctx) is F
    assert t.on_event_time(450, W, ctx) is C  # not a registered boundary

    t.clear(W, ctx)
    assert ctx.state == {}
    assert 999 not in ctx.event_timers


def test_continuous_trigger_first_boundary_is_aligned_to_the_interval():
    t, ctx = ContinuousEventTimeTrigger.of(100), FakeTriggerContext(watermark=-(2**63))
    t.on_element("e", 1234, TimeWindow(1000, 2000), ctx)
    assert ctx.get_state("fire") == 1300
    neg = FakeTriggerContext(watermark=-(2**63))
    t.on_element("e", -150, TimeWindow(-1000, 0), neg)
    assert neg.get_state("fire") == -100  # the next boundary after -150, not 0


def test_continuous_trigger_fires_at_once_for_a_window_behind_the_watermark():
    t, ctx = ContinuousEventTimeTrigger.of(100), FakeTriggerContext(watermark=999)
    assert t.on_element("late", 10, W, ctx) is F
    assert ctx.event_timers == set()


class _ReducingMin:
    """A stand-in for the ReducingState a PyFlink trigger gets from ctx.get_partitioned_state."""

    def __init__(self) -> None:
        self.value: int | None = None

    def get(self) -> int | None:
        return self.value

    def add(self, v: int) -> None:
        self.value = v if self.value is None else min(self.value, v)

    def clear(self) -> None:
        self.value = None


def test_register_next_fire_timestamp_is_pyflinks_hook():
    # Called as PyFlink's triggers call it: the time, the window, the context and the state to keep
    # the fire time in; the next fire is an interval later but never past the window's end.
    t, ctx, state = ContinuousEventTimeTrigger.of(300), FakeTriggerContext(), _ReducingMin()
    t.register_next_fire_timestamp(300, W, ctx, state)
    assert state.get() == 600 and ctx.event_timers == {600}
    t.register_next_fire_timestamp(900, W, ctx, state)
    assert state.get() == 600 and 999 in ctx.event_timers  # reduced with min, as PyFlink's state is


def test_a_subclass_overriding_register_next_fire_timestamp_changes_the_schedule():
    # The built-in methods go through the hook, so a PyFlink subclass that fires twice as often does.
    class Halving(ContinuousEventTimeTrigger):
        def register_next_fire_timestamp(self, time, window, ctx, fire_timestamp_state):
            nxt = min(time + self.interval // 2, window.max_timestamp())
            fire_timestamp_state.add(nxt)
            ctx.register_event_time_timer(nxt)

    t, ctx = Halving(200), FakeTriggerContext(watermark=0)
    t.on_element("e", 10, W, ctx)
    assert ctx.get_state("fire") == 100
    assert t.on_event_time(100, W, ctx) is F
    assert ctx.get_state("fire") == 200


def test_continuous_trigger_does_not_merge():
    t = ContinuousEventTimeTrigger.of(100)
    assert not t.can_merge()
    with pytest.raises(TypeError, match="cannot be used with merging"):
        t.on_merge(W, FakeTriggerContext())


# -- PurgingTrigger ---------------------------------------------------------------------


class _Scripted(Trigger):
    def __init__(self, result: TriggerResult) -> None:
        self.result = result
        self.cleared = False

    def on_element(self, element, timestamp, window, ctx):
        return self.result

    def on_event_time(self, time, window, ctx):
        return self.result

    def on_processing_time(self, time, window, ctx):
        return self.result

    def clear(self, window, ctx):
        self.cleared = True


@pytest.mark.parametrize(("nested", "expected"), [(C, C), (F, FP), (P, P), (FP, FP)])
def test_purging_trigger_turns_every_fire_into_fire_and_purge(nested, expected):
    t, ctx = PurgingTrigger.of(_Scripted(nested)), FakeTriggerContext()
    assert t.on_element("e", 0, W, ctx) is expected
    assert t.on_event_time(999, W, ctx) is expected
    assert t.on_processing_time(999, W, ctx) is expected


def test_purging_count_trigger_and_delegation():
    t, ctx = PurgingTrigger.of(CountTrigger.of(2)), FakeTriggerContext()
    assert [t.on_element(i, 0, W, ctx) for i in range(4)] == [C, FP, C, FP]
    assert t.can_merge()
    inner = _Scripted(C)
    PurgingTrigger.of(inner).clear(W, ctx)
    assert inner.cleared
    assert not PurgingTrigger.of(ContinuousEventTimeTrigger.of(10)).can_merge()
    et = PurgingTrigger.of(EventTimeTrigger.create())
    merge_ctx = FakeTriggerContext(watermark=0)
    et.on_merge(W, merge_ctx)
    assert merge_ctx.event_timers == {999}


def test_never_trigger_never_fires_and_cannot_merge():
    t, ctx = NeverTrigger(), FakeTriggerContext(watermark=2**63 - 1)
    assert t.on_element("e", 0, GlobalWindow(), ctx) is C
    assert t.on_event_time(2**63 - 1, GlobalWindow(), ctx) is C
    assert t.on_processing_time(2**63 - 1, GlobalWindow(), ctx) is C
    assert ctx.event_timers == ctx.processing_timers == set()
    assert not t.can_merge()
