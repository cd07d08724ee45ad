"""Watermark generation at the source and the valve that combines a task's input channels."""
from __future__ import annotations

import random

import pytest

from millstream.engine.runtime.watermarks import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    StatusWatermarkValve,
    TimestampExtractor,
    WatermarkGenerator,
)

# -- WatermarkGenerator -----------------------------------------------------------------


def test_bounded_out_of_orderness_is_max_timestamp_minus_bound_minus_one():
    g = WatermarkGenerator(200)
    assert g.current() == MIN_WATERMARK
    g.on_event(1000)
    assert g.current() == 799
    g.on_event(500)  # an out-of-order element never pulls the watermark back
    assert g.current() == 799
    g.on_event(1001)
    assert g.current() == 800


def test_monotonous_is_bound_zero():
    g = WatermarkGenerator(0)
    assert g.current() == MIN_WATERMARK
    g.on_event(-5)
    assert g.current() == -6
    g.on_event(10)
    assert g.current() == 9


def test_generator_accepts_timestamps_near_the_minimum():
    g = WatermarkGenerator(1000)
    g.on_event(MIN_WATERMARK)
    assert g.current() == MIN_WATERMARK


def test_generator_watermark_is_monotone_over_random_streams():
    rng = random.Random(1)
    g = WatermarkGenerator(50)
    last, newest = g.current(), MIN_WATERMARK
    for _ in range(1000):
        ts = rng.randint(-10_000, 10_000)
        newest = max(newest, ts)
        g.on_event(ts)
        assert g.current() >= last
        assert g.current() == newest - 51
        last = g.current()


# -- TimestampExtractor -----------------------------------------------------------------


def test_extractor_passes_the_previous_timestamp_or_min_watermark():
    seen = []

    def fn(v, prev):
        seen.append(prev)
        return v * 10

    ex = TimestampExtractor(fn, "stamps")
    assert ex.extract([1, 2], None) == [10, 20]
    assert seen == [MIN_WATERMARK, MIN_WATERMARK]
    assert ex.extract([3], [77]) == [30]
    assert seen[-1] == 77


@pytest.mark.parametrize("bad", [1.5, 1000.0, "1000", True, False, None])
def test_extractor_rejects_non_int_timestamps_naming_the_operator(bad):
    ex = TimestampExtractor(lambda v, p: bad, "Timestamps/Watermarks (orders)")
    with pytest.raises(TypeError) as err:
        ex.extract([{"id": 1}], None)
    msg = str(err.value)
    assert "'Timestamps/Watermarks (orders)'" in msg
    assert repr(bad) in msg and type(bad).__name__ in msg
    assert "int epoch milliseconds" in msg


def test_extractor_reports_the_offending_record_not_the_first():
    ex = TimestampExtractor(lambda v, p: v, "op")
    with pytest.raises(TypeError, match=r"returned 2\.5 \(float\) for 2\.5"):
        ex.extract([1, 2, 2.5], None)


def test_extractor_accepts_negative_and_huge_ints():
    ex = TimestampExtractor(lambda v, p: v, "op")
    assert ex.extract([-1, 0, MAX_WATERMARK], None) == [-1, 0, MAX_WATERMARK]


# -- StatusWatermarkValve ---------------------------------------------------------------


def test_valve_emits_the_minimum_over_channels_only_when_it_advances():
    v = StatusWatermarkValve(3)
    assert v.input_watermark(0, 100) is None
    assert v.input_watermark(1, 50) is None
    assert v.input_watermark(2, 70) == 50
    assert v.input_watermark(1, 200) == 70
    assert v.input_watermark(2, 300) == 100
    assert v.input_watermark(0, 100) is None  # a repeat changes nothing
    assert v.current == 100


def test_valve_never_goes_backwards():
    v = StatusWatermarkValve(2)
    v.input_watermark(0, 100)
    assert v.input_watermark(1, 100) == 100
    assert v.input_watermark(0, 40) is None  # a channel's own watermark does not regress either
    assert v.watermarks[0] == 100
    assert v.input_watermark(1, 150) is None
    assert v.input_watermark(0, 120) == 120


def test_valve_random_streams_match_the_min_of_per_channel_maxima():
    rng = random.Random(9)
    for _ in range(50):
        n = rng.randint(1, 5)
        v = StatusWatermarkValve(n)
        maxima = [MIN_WATERMARK] * n
        emitted = []
        for _ in range(60):
            ch, wm = rng.randrange(n), rng.randint(-1000, 1000)
            maxima[ch] = max(maxima[ch], wm)
            out = v.input_watermark(ch, wm)
            if out is not None:
                emitted.append(out)
            assert v.current == min(maxima)
        assert emitted == sorted(set(emitted))


def test_idle_channels_are_left_out_of_the_minimum():
    v = StatusWatermarkValve(2)
    v.input_watermark(0, 500)
    assert v.current == MIN_WATERMARK
    assert v.input_idle(1, True) == 500
    assert v.input_watermark(0, 600) == 600


def test_a_channel_resuming_behind_the_watermark_does_not_pull_it_back():
    v = StatusWatermarkValve(2)
    v.input_watermark(0, 500)
    v.input_idle(1, True)
    assert v.current == 500
    assert v.input_watermark(1, 100) is None  # active again, far behind
    assert not v.idle[1]
    assert v.current == 500
    assert v.input_watermark(0, 900) is None  # held back by channel 1 now
    assert v.input_watermark(1, 700) == 700


def test_input_idle_false_reactivates_a_channel():
    v = StatusWatermarkValve(2)
    v.input_watermark(0, 10)
    v.input_idle(1, True)
    assert v.input_idle(1, False) is None
    assert v.input_watermark(0, 20) is None  # channel 1 (still at MIN) counts again


def test_when_every_channel_is_idle_the_highest_watermark_is_released():
    # Flink's StatusWatermarkValve: with all inputs idle, the maximum across channels goes out.
    v = StatusWatermarkValve(2)
    v.input_watermark(0, 100)
    v.input_watermark(1, 300)
    assert v.input_idle(1, True) is None  # channel 0 alone still holds the minimum at 100
    assert v.input_idle(0, True) == 300


def test_all_idle_after_the_minimum_moved_keeps_the_watermark():
    v = StatusWatermarkValve(2)
    v.input_watermark(0, 100)
    v.input_watermark(1, 300)
    assert v.current == 100
    assert v.input_idle(0, True) == 300
    assert v.input_idle(1, True) is None
    assert v.current == 300
    assert v.all_idle()
    assert v.input_watermark(0, 350) == 350
    assert not v.all_idle()


def test_all_idle_from_the_start_holds_at_min():
    v = StatusWatermarkValve(2)
    assert v.input_idle(0, True) is None
    assert v.input_idle(1, True) is None
    assert v.current == MIN_WATERMARK and v.all_idle()


def test_ended_channels_are_left_out_and_all_ended_gives_max():
    v = StatusWatermarkValve(3)
    v.input_watermark(0, 100)
    v.input_watermark(1, 200)
    v.input_watermark(2, 300)
    assert v.end_of_partition(0) == 200
    assert v.end_of_partition(2) is None  # channel 1 still holds it at 200
    assert v.current == 200
    assert v.end_of_partition(1) == MAX_WATERMARK
    assert v.current == MAX_WATERMARK


def test_ended_plus_idle_holds_and_counts_as_all_idle():
    v = StatusWatermarkValve(2)
    v.input_watermark(0, 100)
    v.input_watermark(1, 50)
    assert v.end_of_partition(1) == 100
    assert v.input_idle(0, True) is None
    assert v.current == 100
    assert v.all_idle()


def test_single_channel_end_gives_max_even_without_watermarks():
    v = StatusWatermarkValve(1)
    assert v.end_of_partition(0) == MAX_WATERMARK
    assert v.input_watermark(0, 5) is None
