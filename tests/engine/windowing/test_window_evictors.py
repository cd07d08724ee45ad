"""Evictors on (value, timestamp) lists: CountEvictor keeps the newest N, TimeEvictor keeps a time span."""
from __future__ import annotations

import pytest

from millstream.engine.common.time import Time
from millstream.engine.windowing.evictors import CountEvictor, Evictor, TimeEvictor
from millstream.engine.windowing.windows import GlobalWindow, TimeWindow

ELEMENTS = [("a", 10), ("b", 20), ("c", 30), ("d", 40), ("e", 50)]


def test_base_evictor_keeps_everything_before_the_function():
    e = Evictor()
    assert e.evict(ELEMENTS, GlobalWindow()) == ELEMENTS
    assert not e.do_evict_after


@pytest.mark.parametrize(("n", "kept"), [(1, "e"), (2, "de"), (5, "abcde"), (9, "abcde")])
def test_count_evictor_keeps_the_last_n_in_arrival_order(n, kept):
    out = CountEvictor.of(n).evict(ELEMENTS, GlobalWindow())
    assert "".join(v for v, _ in out) == kept


def test_count_evictor_goes_by_position_not_timestamp():
    elements = [("x", 50), ("y", 10), ("z", 30)]
    assert CountEvictor.of(2).evict(elements, GlobalWindow()) == [("y", 10), ("z", 30)]


def test_count_evictor_does_not_mutate_its_input_and_handles_empty():
    elements = list(ELEMENTS)
    CountEvictor.of(2).evict(elements, GlobalWindow())
    assert elements == ELEMENTS
    assert CountEvictor.of(2).evict([], GlobalWindow()) == []


def test_evict_after_flag():
    assert CountEvictor.of(2, do_evict_after=True).do_evict_after
    assert TimeEvictor.of(Time.seconds(1), do_evict_after=True).do_evict_after
    assert not TimeEvictor.of(1000).do_evict_after


def test_count_evictor_of_zero_evicts_everything():
    assert CountEvictor.of(0).evict(ELEMENTS, GlobalWindow()) == []


def test_time_evictor_keeps_elements_newer_than_newest_minus_size():
    # newest 50, size 20: cut 30; Flink evicts timestamps <= cut
    out = TimeEvictor.of(Time.milliseconds(20)).evict(ELEMENTS, TimeWindow(0, 100))
    assert out == [("d", 40), ("e", 50)]


def test_time_evictor_uses_the_newest_timestamp_not_the_last_element():
    elements = [("new", 100), ("old", 5), ("mid", 95)]
    assert TimeEvictor.of(10).evict(elements, TimeWindow(0, 200)) == [("new", 100), ("mid", 95)]


def test_time_evictor_with_negative_timestamps_and_empty_input():
    elements = [("a", -100), ("b", -50), ("c", -1)]
    w = TimeWindow(-100, 0)
    assert TimeEvictor.of(48).evict(elements, w) == [("c", -1)]
    assert TimeEvictor.of(49).evict(elements, w) == [("c", -1)]  # cut -50: a timestamp at the cut goes
    assert TimeEvictor.of(50).evict(elements, w) == [("b", -50), ("c", -1)]
    assert TimeEvictor.of(99).evict(elements, w) == [("b", -50), ("c", -1)]
    assert TimeEvictor.of(100).evict(elements, w) == elements
    assert TimeEvictor.of(10).evict([], TimeWindow(0, 1)) == []
