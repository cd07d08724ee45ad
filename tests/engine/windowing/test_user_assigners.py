"""Assigners and trigger state written against PyFlink's API, adapted to Millstream's protocol."""
from __future__ import annotations

from typing import Any

import pytest

from millstream.engine.compat.unsupported import NotSupportedError
from millstream.engine.datastream.state import ListStateDescriptor, MapStateDescriptor, ReducingStateDescriptor, ValueStateDescriptor
from millstream.engine.windowing.assigners import MergingWindowAssigner, TumblingEventTimeWindows, WindowAssigner
from millstream.engine.windowing.trigger_state import merge_into, state_view
from millstream.engine.windowing.triggers import CountTrigger, Trigger
from millstream.engine.windowing.user_assigners import UserWindowAssigner, adapt_assigner, is_pyflink_style
from millstream.engine.windowing.windows import TimeWindow


class Buckets(WindowAssigner):
    def __init__(self, size: int = 10) -> None:
        self.size = size

    def assign_windows(self, element, timestamp, context):
        assert isinstance(context, WindowAssigner.WindowAssignerContext)
        assert context.get_current_processing_time() > 0
        return [TimeWindow(timestamp - timestamp % self.size, timestamp - timestamp % self.size + self.size)]

    def get_default_trigger(self, env):
        return CountTrigger.of(3)

    def is_event_time(self):
        return False


class Sessions(MergingWindowAssigner):
    def assign_windows(self, element, timestamp, context):
        return [TimeWindow(timestamp, timestamp + 5)]

    def merge_windows(self, windows, callback):
        TimeWindow.merge_windows(windows, callback)

    def get_default_trigger(self, env):
        return CountTrigger.of(1)

    def is_event_time(self):
        return True


def test_pyflink_style_assigners_are_recognised_and_builtin_ones_left_alone():
    assert is_pyflink_style(Buckets()) and is_pyflink_style(Sessions())
    builtin = TumblingEventTimeWindows.of(10)
    assert not is_pyflink_style(builtin) and adapt_assigner(builtin) is builtin


def test_the_adapter_speaks_millstreams_protocol():
    a = adapt_assigner(Buckets())
    assert isinstance(a, UserWindowAssigner)
    assert a.is_event_time is False and a.is_merging is False
    assert a.assign_windows("x", 23) == [TimeWindow(20, 30)]
    assert isinstance(a.get_default_trigger(), CountTrigger)
    from millstream.engine.windowing.user_assigners import _AssignerContext

    assert issubclass(_AssignerContext, Buckets.WindowAssignerContext)
    with pytest.raises(NotSupportedError, match="get_runtime_context"):
        _AssignerContext().get_runtime_context()


def test_merging_through_the_callback():
    s = adapt_assigner(Sessions())
    assert s.is_merging and s.is_event_time
    windows = [TimeWindow(0, 5), TimeWindow(3, 8), TimeWindow(20, 25)]
    assert s.merge_windows(windows) == [
        (TimeWindow(0, 8), [TimeWindow(0, 5), TimeWindow(3, 8)]),
        (TimeWindow(20, 25), [TimeWindow(20, 25)]),
    ]


def test_windowed_stream_adapts_and_names_by_the_users_class():
    from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
    from millstream.engine.datastream.functions import ProcessWindowFunction

    class P(ProcessWindowFunction):
        def process(self, key, context, elements):
            yield (key, context.window().start, len(list(elements)))

    env = StreamExecutionEnvironment.get_execution_environment()
    # Buckets of a day: with 10 ms ones a loaded machine spread the four records over two buckets
    # (processing time), and neither reached the trigger's count (a CI run printed nothing).
    day = 86_400_000
    out = env.from_collection([("k", 1), ("k", 2), ("k", 3), ("k", 4)]).key_by(lambda v: v[0]).window(Buckets(day)).process(P())
    assert out.get_name().startswith("Window(Buckets, ")
    # Processing-time buckets with a count-of-3 default trigger: one firing with three elements.
    assert [r[2] for r in out.execute_and_collect()] == [3]


def test_trigger_state_views_and_merging():
    slots: dict[str, Any] = {}
    get, set_ = slots.get, lambda n, v: slots.pop(n, None) if v is None else slots.__setitem__(n, v)
    count = state_view(ReducingStateDescriptor("c", lambda a, b: a + b), get, set_)
    count.add(2)
    count.add(3)
    assert count.get() == 5
    values = state_view(ListStateDescriptor("l"), get, set_)
    values.add("x")
    values.add_all(["y"])
    assert list(values) == ["x", "y"]
    flag = state_view(ValueStateDescriptor("v"), get, set_)
    flag.update(True)
    assert flag.value() is True
    flag.clear()
    assert flag.value() is None
    with pytest.raises(TypeError, match="value, list, reducing or aggregating"):
        state_view(MapStateDescriptor("m"), get, set_)
    merge_into(ReducingStateDescriptor("c", lambda a, b: a + b), [{"pyflink-state:c": 10}, {}], get, set_)
    assert count.get() == 15
    merge_into(ListStateDescriptor("l"), [{"pyflink-state:l": ["z"]}], get, set_)
    assert values.get() == ["x", "y", "z"]
    with pytest.raises(TypeError, match="merge_partitioned_state"):
        merge_into(ValueStateDescriptor("v"), [], get, set_)
    assert issubclass(Trigger.OnMergeContext, Trigger.TriggerContext)
