"""Window types and assigners: Flink's start formula (negative timestamps too), sliding coverage, session merging."""
from __future__ import annotations

import random

import pytest

from millstream.engine.common.time import Time
from millstream.engine.windowing.assigners import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    EventTimeSessionWindows,
    GlobalWindows,
    ProcessingTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from millstream.engine.windowing.triggers import CountTrigger, EventTimeTrigger, NeverTrigger, ProcessingTimeTrigger, PurgingTrigger
from millstream.engine.windowing.windows import MAX_TIMESTAMP, CountWindow, GlobalWindow, TimeWindow, merge_time_windows

HOUR = 3_600_000
DAY = 24 * HOUR


def _java_rem(a: int, b: int) -> int:
    """Java's ``%``: the remainder takes the sign of the dividend."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _flink_start(ts: int, offset: int, size: int) -> int:
    # TimeWindow.getWindowStartWithOffset, verbatim, with Java's remainder.
    return ts - _java_rem(ts - offset + size, size)


# -- TimeWindow -------------------------------------------------------------------------


def test_time_window_is_half_open_and_its_max_timestamp_is_end_minus_one():
    assert TimeWindow(0, 10).max_timestamp() == 9
    assert TimeWindow(-10, 0).max_timestamp() == -1


def test_intersects_is_inclusive_of_touching_ends_like_flink():
    assert TimeWindow(0, 10).intersects(TimeWindow(10, 20))
    assert TimeWindow(10, 20).intersects(TimeWindow(0, 10))
    assert not TimeWindow(0, 10).intersects(TimeWindow(11, 20))
    assert TimeWindow(0, 100).intersects(TimeWindow(40, 50))  # containment


def test_cover_spans_both_windows():
    assert TimeWindow(5, 10).cover(TimeWindow(0, 7)) == TimeWindow(0, 10)
    assert TimeWindow(0, 3).cover(TimeWindow(8, 9)) == TimeWindow(0, 9)


def test_global_and_count_windows_never_end_by_time():
    assert GlobalWindow.get() == GlobalWindow()
    assert GlobalWindow().max_timestamp() == MAX_TIMESTAMP
    assert CountWindow(3).max_timestamp() == MAX_TIMESTAMP


# -- the start formula ------------------------------------------------------------------


def test_window_start_matches_flinks_formula_wherever_java_and_python_remainders_agree():
    rng = random.Random(7)
    for _ in range(2000):
        size = rng.randint(1, 10_000)
        offset = rng.randint(0, size - 1)
        ts = rng.randint(offset - size, 10**13)  # ts - offset + size >= 0
        assert TimeWindow.get_window_start_with_offset(ts, offset, size) == _flink_start(ts, offset, size)


@pytest.mark.parametrize(
    ("ts", "offset", "size", "start"),
    [
        (-1, 0, 10, -10),
        (-10, 0, 10, -10),
        (-11, 0, 10, -20),
        (-15, 0, 10, -20),
        (-25, 3, 10, -27),
        (-7, 3, 10, -7),
        (-(10**12) - 1, 0, 1000, -(10**12) - 1000),
    ],
)
def test_negative_timestamps_land_in_the_window_that_contains_them(ts, offset, size, start):
    got = TimeWindow.get_window_start_with_offset(ts, offset, size)
    assert got == start
    assert got <= ts < got + size


def test_for_timestamps_below_offset_minus_size_java_remainder_would_miss_the_timestamp():
    # Flink's formula with Java's remainder puts ts=-15 into [-10, 0), which does not contain it;
    # the floored remainder keeps the window containing the element.
    assert _flink_start(-15, 0, 10) == -10
    assert TimeWindow.get_window_start_with_offset(-15, 0, 10) == -20


def test_random_negative_and_positive_timestamps_always_get_an_aligned_window_containing_them():
    rng = random.Random(11)
    for _ in range(2000):
        size = rng.randint(1, 5000)
        offset = rng.randint(-3 * size, 3 * size)
        ts = rng.randint(-(10**12), 10**12)
        a = TumblingEventTimeWindows.of(size, offset)
        [w] = a.assign_windows(None, ts)
        assert w.start <= ts < w.end and w.end - w.start == size
        assert (w.start - offset) % size == 0


# -- tumbling ---------------------------------------------------------------------------


def test_tumbling_boundaries():
    a = TumblingEventTimeWindows.of(Time.seconds(5))
    assert a.assign_windows("x", 0) == [TimeWindow(0, 5000)]
    assert a.assign_windows("x", 4999) == [TimeWindow(0, 5000)]
    assert a.assign_windows("x", 5000) == [TimeWindow(5000, 10000)]
    assert a.assign_windows("x", -1) == [TimeWindow(-5000, 0)]


def test_flink_doc_example_hourly_windows_offset_by_15_minutes():
    # "TumblingEventTimeWindows.of(Time.hours(1), Time.minutes(15)): windows start at 0:15:00, 1:15:00, ..."
    a = TumblingEventTimeWindows.of(Time.hours(1), Time.minutes(15))
    assert a.assign_windows(None, 0) == [TimeWindow(-45 * 60_000, 15 * 60_000)]
    assert a.assign_windows(None, 20 * 60_000) == [TimeWindow(15 * 60_000, 75 * 60_000)]
    assert a.assign_windows(None, HOUR + 14 * 60_000) == [TimeWindow(15 * 60_000, 75 * 60_000)]


def test_flink_doc_example_daily_windows_at_china_midnight_with_offset_minus_8_hours():
    # "TumblingEventTimeWindows.of(Time.days(1), Time.hours(-8))" starts each day at 00:00 UTC+08:00.
    a = TumblingEventTimeWindows.of(Time.days(1), Time.hours(-8))
    day = 18_628 * DAY  # 2021-01-01T00:00Z
    local_midnight = day - 8 * HOUR  # 2021-01-01T00:00+08:00
    ts = local_midnight + 30 * 60_000
    assert a.assign_windows(None, ts) == [TimeWindow(local_midnight, local_midnight + DAY)]
    assert a.assign_windows(None, local_midnight - 1) == [TimeWindow(local_midnight - DAY, local_midnight)]


def test_offsets_are_taken_modulo_the_size():
    assert TumblingEventTimeWindows.of(10, 13).assign_windows(None, 0) == [TimeWindow(-7, 3)]
    assert TumblingEventTimeWindows.of(10, -7).assign_windows(None, 0) == [TimeWindow(-7, 3)]


@pytest.mark.parametrize("size", [0, -5])
def test_non_positive_sizes_are_rejected(size):
    with pytest.raises(ValueError, match="size"):
        TumblingEventTimeWindows.of(size)
    with pytest.raises(ValueError, match="size and slide"):
        SlidingEventTimeWindows.of(10, size)
    with pytest.raises(ValueError, match="size and slide"):
        SlidingEventTimeWindows.of(size, 10)


# -- sliding ----------------------------------------------------------------------------


def _brute_force_windows(ts: int, size: int, slide: int, offset: int) -> set[TimeWindow]:
    lo = ts - size - 2 * slide
    first = lo - ((lo - offset) % slide)
    return {TimeWindow(s, s + size) for s in range(first, ts + 1, slide) if s <= ts < s + size}


def test_sliding_gives_size_over_slide_windows_all_containing_the_timestamp():
    rng = random.Random(3)
    for _ in range(500):
        slide = rng.randint(1, 200)
        size = slide * rng.randint(1, 8)
        offset = rng.randint(-slide, slide)
        ts = rng.randint(-(10**9), 10**9)
        windows = SlidingEventTimeWindows.of(size, slide, offset).assign_windows(None, ts)
        assert len(windows) == size // slide
        assert len(set(windows)) == len(windows)
        assert all(w.start <= ts < w.end and w.end - w.start == size for w in windows)
        assert set(windows) == _brute_force_windows(ts, size, slide, offset)


def test_sliding_with_size_not_a_multiple_of_slide_gives_every_aligned_window_containing_ts():
    rng = random.Random(5)
    for _ in range(500):
        slide = rng.randint(2, 50)
        size = rng.randint(1, 300)
        offset = rng.randint(0, slide - 1)
        ts = rng.randint(-10_000, 10_000)
        windows = SlidingEventTimeWindows.of(size, slide, offset).assign_windows(None, ts)
        assert set(windows) == _brute_force_windows(ts, size, slide, offset)


def test_sliding_example_newest_window_first():
    a = SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5))
    assert a.assign_windows(None, 7000) == [TimeWindow(5000, 15000), TimeWindow(0, 10000)]
    assert a.assign_windows(None, -1) == [TimeWindow(-5000, 5000), TimeWindow(-10000, 0)]


def test_flink_doc_example_sliding_12h_by_1h_at_china_offset():
    a = SlidingEventTimeWindows.of(Time.hours(12), Time.hours(1), Time.hours(-8))
    ts = 18_628 * DAY + 30 * 60_000
    windows = a.assign_windows(None, ts)
    assert len(windows) == 12
    assert windows[0] == TimeWindow(18_628 * DAY, 18_628 * DAY + 12 * HOUR)


def test_a_slide_larger_than_the_size_leaves_gaps():
    a = SlidingEventTimeWindows.of(5, 10)
    assert a.assign_windows(None, 3) == [TimeWindow(0, 5)]
    assert a.assign_windows(None, 7) == []


# -- time domains and default triggers ---------------------------------------------------


def test_event_and_processing_time_assigners_pick_matching_default_triggers():
    for a in (TumblingEventTimeWindows.of(10), SlidingEventTimeWindows.of(10, 5), EventTimeSessionWindows.with_gap(10)):
        assert a.is_event_time
        assert type(a.get_default_trigger()) is EventTimeTrigger
    for a in (
        TumblingProcessingTimeWindows.of(10),
        SlidingProcessingTimeWindows.of(10, 5),
        ProcessingTimeSessionWindows.with_gap(10),
    ):
        assert not a.is_event_time
        assert type(a.get_default_trigger()) is ProcessingTimeTrigger
    assert type(TumblingProcessingTimeWindows.of(10)) is TumblingProcessingTimeWindows
    assert type(SlidingProcessingTimeWindows.of(10, 5)) is SlidingProcessingTimeWindows


def test_count_assigners_default_triggers():
    g = GlobalWindows.create()
    assert g.assign_windows("x", 123) == [GlobalWindow()]
    assert type(g.get_default_trigger()) is NeverTrigger

    tumbling = CountTumblingWindowAssigner.of(3).get_default_trigger()
    assert type(tumbling) is PurgingTrigger
    assert type(tumbling.nested) is CountTrigger and tumbling.nested.count == 3

    sliding = CountSlidingWindowAssigner.of(5, 2)
    trigger = sliding.get_default_trigger()
    assert type(trigger) is PurgingTrigger and type(trigger.nested) is CountTrigger and trigger.nested.count == 5
    # PyFlink's CountSlidingWindowAssigner: element n is in every window i with i*2 <= n <= i*2+4.
    assert [sliding.windows_for_count(n) for n in range(5)] == [
        [CountWindow(0)], [CountWindow(0)], [CountWindow(1), CountWindow(0)],
        [CountWindow(1), CountWindow(0)], [CountWindow(2), CountWindow(1), CountWindow(0)],
    ]
    assert sliding.windows_for_count(7) == [CountWindow(3), CountWindow(2)]


# -- sessions ---------------------------------------------------------------------------


def test_session_window_is_timestamp_plus_gap():
    a = EventTimeSessionWindows.with_gap(Time.seconds(3))
    assert a.is_merging
    assert a.assign_windows("x", 1000) == [TimeWindow(1000, 4000)]
    assert a.assign_windows("x", -1000) == [TimeWindow(-1000, 2000)]


def test_dynamic_gap_from_a_callable_or_an_extractor_object():
    a = EventTimeSessionWindows.with_dynamic_gap(lambda e: e[1])
    assert a.assign_windows(("k", 7), 100) == [TimeWindow(100, 107)]

    class Extractor:
        def extract(self, element):
            return element * 2

    b = EventTimeSessionWindows.with_dynamic_gap(Extractor())
    assert b.assign_windows(5, 0) == [TimeWindow(0, 10)]


@pytest.mark.parametrize("gap", [0, -1])
def test_non_positive_session_gaps_are_rejected(gap):
    with pytest.raises(ValueError, match="gap"):
        EventTimeSessionWindows.with_gap(gap)
    with pytest.raises(ValueError, match="dynamic session gap must be positive"):
        EventTimeSessionWindows.with_dynamic_gap(lambda e: gap).assign_windows("e", 0)


def test_merge_touching_windows_since_intersects_is_inclusive():
    # An element exactly at ts + gap joins the session started at ts.
    gap = 10
    a = EventTimeSessionWindows.with_gap(gap)
    ws = a.assign_windows(None, 0) + a.assign_windows(None, gap)
    assert a.merge_windows(ws) == [(TimeWindow(0, 20), [TimeWindow(0, 10), TimeWindow(10, 20)])]


def test_windows_one_millisecond_apart_stay_separate():
    assert merge_time_windows([TimeWindow(0, 10), TimeWindow(11, 21)]) == [
        (TimeWindow(0, 10), [TimeWindow(0, 10)]),
        (TimeWindow(11, 21), [TimeWindow(11, 21)]),
    ]


def test_merge_chains_and_keeps_separate_sessions_apart():
    ws = [TimeWindow(30, 40), TimeWindow(0, 10), TimeWindow(100, 110), TimeWindow(5, 15), TimeWindow(14, 24)]
    merged = merge_time_windows(ws)
    assert [c for c, _ in merged] == [TimeWindow(0, 24), TimeWindow(30, 40), TimeWindow(100, 110)]
    assert merged[0][1] == [TimeWindow(0, 10), TimeWindow(5, 15), TimeWindow(14, 24)]


def test_merge_with_a_long_window_swallowing_later_short_ones():
    ws = [TimeWindow(50, 60), TimeWindow(0, 100), TimeWindow(10, 20), TimeWindow(99, 130)]
    assert merge_time_windows(ws) == [
        (TimeWindow(0, 130), [TimeWindow(0, 100), TimeWindow(10, 20), TimeWindow(50, 60), TimeWindow(99, 130)])
    ]


def test_merge_is_independent_of_input_order_and_partitions_the_inputs():
    rng = random.Random(42)
    for _ in range(200):
        ws = []
        for _ in range(rng.randint(1, 20)):
            s = rng.randint(-500, 500)
            ws.append(TimeWindow(s, s + rng.randint(1, 60)))
        merged = merge_time_windows(ws)
        shuffled = ws[:]
        rng.shuffle(shuffled)
        assert merge_time_windows(shuffled) == merged
        members = sorted(m for _, ms in merged for m in ms)
        assert members == sorted(ws)
        for cover, ms in merged:
            assert cover == TimeWindow(min(m.start for m in ms), max(m.end for m in ms))
        covers = [c for c, _ in merged]
        for a, b in zip(covers, covers[1:]):
            assert a.end < b.start  # disjoint and not even touching


def test_non_merging_assigners_return_each_window_alone():
    a = TumblingEventTimeWindows.of(10)
    assert not a.is_merging
    ws = [TimeWindow(0, 10), TimeWindow(10, 20)]
    assert a.merge_windows(ws) == [(TimeWindow(0, 10), [TimeWindow(0, 10)]), (TimeWindow(10, 20), [TimeWindow(10, 20)])]
