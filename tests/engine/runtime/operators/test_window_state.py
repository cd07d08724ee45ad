"""ProcessWindowFunction's ``window_state()`` (per key and window, dropped with the window) and
``global_state()`` (per key, across windows), in the general and the aligned window operators."""
from __future__ import annotations

import pytest

from millstream.engine.datastream.functions import ProcessWindowFunction
from millstream.engine.datastream.state import ValueStateDescriptor
from millstream.engine.runtime.operators.aligned_window_table import StateTableAlignedWindowOperator
from millstream.engine.runtime.operators.aligned_window import AlignedWindowOperator
from millstream.engine.runtime.operators.window import WINDOW_STATE_PREFIX, WindowOperator
from millstream.engine.windowing.assigners import EventTimeSessionWindows, TumblingEventTimeWindows
from tests.engine.runtime.operators.test_window_operators import Harness, sum_reduce

BOTH = pytest.mark.parametrize("cls", [AlignedWindowOperator, StateTableAlignedWindowOperator, WindowOperator])


class Firings(ProcessWindowFunction):
    """Emits (key, window start, sum, firings of this window, windows fired for this key so far)."""

    def __init__(self, clear_itself: bool) -> None:
        self.clear_itself = clear_itself
        self.cleared: list = []

    def process(self, key, context, elements):
        fired = context.window_state().get_state(ValueStateDescriptor("fired", None))
        fired.update((fired.value() or 0) + 1)
        total = context.global_state().get_state(ValueStateDescriptor("windows", None))
        if fired.value() == 1:
            total.update((total.value() or 0) + 1)
        (result,) = elements
        yield (key, context.window().start, result[1], fired.value(), total.value())

    def clear(self, context):
        self.cleared.append(context.window().start)
        if self.clear_itself:
            context.window_state().get_state(ValueStateDescriptor("fired", None)).clear()


def _window_state(h: Harness) -> dict:
    return {n: dict(t) for n, t in h.op.backend.tables.items() if n.startswith(WINDOW_STATE_PREFIX) and t}


@BOTH
@pytest.mark.parametrize("clear_itself", [True, False])
def test_window_state_lives_through_late_firings_and_is_gone_with_the_window(cls, clear_itself):
    fn = Firings(clear_itself)
    h = Harness(
        cls, sum_reduce, assigner=TumblingEventTimeWindows.of(100), allowed_lateness=50, window_function=fn
    )
    h.elements((("a", 1), 10), (("a", 2), 20), (("b", 5), 30))
    h.watermark(99)  # fires [0, 100) for a and b
    h.elements((("a", 3), 40))  # late but within lateness: fires again with the new sum
    h.elements((("a", 1), 110))
    h.watermark(149)  # [0, 100) is cleaned up
    assert fn.cleared == [0, 0]
    assert not _window_state(h) or all(0 not in m for t in _window_state(h).values() for m in t.values())
    h.watermark(199)  # [100, 200) fires: a new window starts with fresh window state, global state goes on
    assert sorted(h.out.values()) == sorted([
        ("a", 0, 3, 1, 1), ("b", 0, 5, 1, 1), ("a", 0, 6, 2, 1), ("a", 100, 1, 1, 2),
    ])
    h.watermark(1000)
    assert _window_state(h) == {}, "per-window state outlived its windows"
    assert h.op.backend.tables["windows"] == {"a": 2, "b": 1}


def test_window_state_is_refused_for_merging_windows():
    class Uses(ProcessWindowFunction):
        def process(self, key, context, elements):
            context.window_state()
            return []

    h = Harness(WindowOperator, Uses(), assigner=EventTimeSessionWindows.with_gap(10), function_kind="process")
    h.elements((("a", 1), 1))
    with pytest.raises(TypeError, match="per-window state is not allowed with merging"):
        h.watermark(100)
