"""Property tests for the StatusWatermarkValve: the task's watermark is the minimum over its active
channels, idle and ended channels are left out, and it never goes backwards."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from millstream.engine.runtime.watermarks import MAX_WATERMARK, MIN_WATERMARK, StatusWatermarkValve


def _op(channels: int) -> st.SearchStrategy:
    ch = st.integers(0, channels - 1)
    return st.one_of(
        st.tuples(st.just("watermark"), ch, st.integers(-1000, 1000)),
        st.tuples(st.just("idle"), ch, st.booleans()),
        st.tuples(st.just("end"), ch, st.none()),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, list]:
    channels = draw(st.integers(1, 5))
    return channels, draw(st.lists(_op(channels), max_size=60))


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_valve_is_the_monotone_minimum_over_active_channels(scenario):
    channels, ops = scenario
    valve = StatusWatermarkValve(channels)
    # The model: each channel's highest watermark, its idleness and whether it ended.
    highest = [MIN_WATERMARK] * channels
    idle = [False] * channels
    ended = [False] * channels
    emitted = MIN_WATERMARK
    for kind, ch, arg in ops:
        if kind == "watermark":
            highest[ch] = max(highest[ch], arg)
            idle[ch] = False  # a watermark makes its channel active again
            out = valve.input_watermark(ch, arg)
        elif kind == "idle":
            idle[ch] = arg
            out = valve.input_idle(ch, arg)
        else:
            ended[ch] = True
            out = valve.end_of_partition(ch)
        active = [highest[c] for c in range(channels) if not idle[c] and not ended[c]]
        if active:
            candidate = min(active)  # idle and ended channels are left out of the minimum
        elif all(ended):
            candidate = MAX_WATERMARK
        else:  # every open channel idle: the highest watermark any of them reached
            candidate = max(highest[c] for c in range(channels) if not ended[c])
        expected = max(emitted, candidate)  # never backwards
        if out is not None:
            assert out > emitted, "a watermark was emitted that does not advance"
            emitted = out
        assert emitted == expected == valve.current
        assert valve.all_idle() == all(idle[c] or ended[c] for c in range(channels))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5), st.data())
def test_the_slowest_active_channel_holds_the_watermark_back(channels, data):
    valve = StatusWatermarkValve(channels)
    marks = data.draw(st.lists(st.integers(0, 10_000), min_size=channels, max_size=channels))
    for ch, wm in enumerate(marks):
        valve.input_watermark(ch, wm)
    assert valve.current == min(marks)
    slow = marks.index(min(marks))
    valve.input_idle(slow, True)
    rest = [m for c, m in enumerate(marks) if c != slow]
    assert valve.current == (min(rest) if rest else min(marks))
