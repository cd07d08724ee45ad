"""``window_all`` / ``count_window_all`` run end to end on the in-process mini cluster.

Each job really runs (sources, HASH exchange on the constant key, the window
operator at the default parallelism as in PyFlink, one subtask of it owning the
constant key, a collect sink); nothing is mocked.
"""
from __future__ import annotations

import time

import pytest

from millstream.engine.common.time import Duration, Time
from millstream.engine.common.watermark_strategy import WatermarkStrategy
from millstream.engine.datastream.functions import (
    AggregateFunction,
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
)
from millstream.engine.datastream.connectors.source_function import SourceFunction
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from millstream.engine.datastream.all_windowed_stream import AllWindowedStream
from millstream.engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from millstream.engine.windowing.evictors import CountEvictor
from millstream.engine.windowing.triggers import CountTrigger
from millstream.engine.windowing.windows import GlobalWindow, TimeWindow

DATA = [("a", 100), ("b", 900), ("c", 1200), ("d", 1999), ("e", 2500), ("f", 4100)]


def _stamped(parallelism: int = 3):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, ts: v[1])
    # rebalance() spreads the records over several subtasks: the window must still see them all.
    return env, env.from_collection(DATA).rebalance().map(lambda v: v).assign_timestamps_and_watermarks(strategy)


class Contents(ProcessAllWindowFunction):
    def process(self, context, elements):
        assert isinstance(context, ProcessAllWindowFunction.Context)
        w = context.window()
        yield (w.start, w.end, tuple(sorted(e[0] for e in elements)))


class Opened(ProcessAllWindowFunction):
    def open(self, runtime_context):
        self.subtasks = runtime_context.get_number_of_parallel_subtasks()

    def process(self, context, elements):
        yield (context.window().start, self.subtasks, tuple(elements))


class SumTs(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value[1]

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class Labelled(AllWindowFunction):
    def apply(self, window, inputs):
        yield (type(window).__name__, tuple(sorted(i if isinstance(i, int) else i[0] for i in inputs)))


def test_window_all_process_sees_the_whole_stream_in_one_subtask():
    env, ds = _stamped(3)
    out = ds.window_all(TumblingEventTimeWindows.of(Time.seconds(1))).process(Contents())
    # PyFlink keys the stream by a constant and plans the window at the default parallelism (Java
    # Flink forces 1); the subtask owning the constant key sees every record.
    assert out.get_parallelism() == 3
    assert sorted(out.execute_and_collect()) == [
        (0, 1000, ("a", "b")),
        (1000, 2000, ("c", "d")),
        (2000, 3000, ("e",)),
        (4000, 5000, ("f",)),
    ]


def test_window_all_reduce_and_aggregate_with_all_window_functions():
    env, ds = _stamped(2)
    windows = TumblingEventTimeWindows.of(Duration.of_seconds(1))
    reduced = ds.window_all(windows).reduce(lambda a, b: (a[0] + b[0], max(a[1], b[1])), window_function=Opened())
    assert sorted(reduced.execute_and_collect()) == [
        (0, 2, (("ab", 900),)), (1000, 2, (("cd", 1999),)), (2000, 2, (("e", 2500),)), (4000, 2, (("f", 4100),)),
    ]
    env, ds = _stamped(2)
    summed = ds.window_all(windows).aggregate(SumTs(), window_function=Labelled())
    # Labelled sorts its inputs: the one aggregate result per window.
    assert sorted(summed.execute_and_collect()) == [
        ("TimeWindow", (1000,)), ("TimeWindow", (2500,)), ("TimeWindow", (3199,)), ("TimeWindow", (4100,))
    ]
    env, ds = _stamped(2)
    plain = ds.window_all(windows).reduce(lambda a, b: (a[0] + b[0], a[1]))
    assert sorted(plain.execute_and_collect()) == [("ab", 100), ("cd", 1200), ("e", 2500), ("f", 4100)]


def test_count_window_all_tumbling_and_sliding():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    out = env.from_collection(list(range(7))).count_window_all(3).apply(Labelled())
    # PyFlink's CountTumblingWindowAssigner: one CountWindow per full window (conformance program count_window_window_object)
    assert sorted(out.execute_and_collect()) == [("CountWindow", (0, 1, 2)), ("CountWindow", (3, 4, 5))]
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    out = env.from_collection(list(range(6))).count_window_all(3, 2).apply(Labelled())
    # Fires every 2 elements over the last 3 (the evictor keeps 3), as count_window(size, slide) does.
    assert sorted(out.execute_and_collect()) == [("GlobalWindow", (0, 1)), ("GlobalWindow", (1, 2, 3)), ("GlobalWindow", (3, 4, 5))]


class Paced(SourceFunction):
    """Emits with pauses, so each record travels in its own batch and watermarks move in between."""

    def __init__(self, data):
        self.data = data

    def run(self, ctx):
        for v in self.data:
            ctx.collect(v)
            time.sleep(0.3)

    def cancel(self):
        pass


def test_window_all_trigger_evictor_lateness_and_late_side_output():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    late = OutputTag("late")
    # After (x, 2500) the watermark is 2499: window [0, 1000) has fired and its lateness (600 ms)
    # has passed, so (y, 500) is late; window [1000, 2000) is still within its lateness, so (z, 1900)
    # joins it and fires it again. One timestamping subtask: the watermark is exactly that one's.
    data = [("p", 100), ("q", 1300), ("x", 2500), ("y", 500), ("z", 1900)]
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, ts: v[1])
    ds = env.add_source(Paced(data)).assign_timestamps_and_watermarks(strategy).set_parallelism(1)
    windowed = (
        ds.window_all(TumblingEventTimeWindows.of(Time.seconds(1)))
        .allowed_lateness(600)
        .side_output_late_data(late)
        .process(Contents())
    )
    got = sorted(windowed.get_side_output(late).map(lambda v: ("late", v[0])).union(windowed).execute_and_collect(), key=repr)
    assert got == sorted(
        [(0, 1000, ("p",)), (1000, 2000, ("q",)), (1000, 2000, ("q", "z")), (2000, 3000, ("x",)), ("late", "y")], key=repr
    )

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    triggered = (
        env.from_collection(list(range(5)))
        .window_all(_global())
        .trigger(CountTrigger.of(2))
        .evictor(CountEvictor.of(1))
        .apply(Labelled())
    )
    # Every second element fires; the evictor keeps only the newest one before the function runs.
    assert sorted(triggered.execute_and_collect()) == [("GlobalWindow", (1,)), ("GlobalWindow", (3,))]


def _global():
    from millstream.engine.windowing.assigners import GlobalWindows

    return GlobalWindows.create()


def test_window_all_sliding_windows_assign_each_record_to_several_windows():
    env, ds = _stamped(2)
    out = ds.window_all(SlidingEventTimeWindows.of(Time.seconds(2), Time.seconds(1))).process(Contents())
    got = sorted(out.execute_and_collect())
    assert got[:3] == [(-1000, 1000, ("a", "b")), (0, 2000, ("a", "b", "c", "d")), (1000, 3000, ("c", "d", "e"))]


def test_window_all_refuses_keyed_window_functions():
    env = StreamExecutionEnvironment.get_execution_environment()
    ws = env.from_collection([1]).window_all(TumblingEventTimeWindows.of(Time.seconds(1)))
    assert isinstance(ws, AllWindowedStream)

    class Keyed(ProcessWindowFunction):
        def process(self, key, context, elements):
            return []

    with pytest.raises(TypeError, match="ProcessAllWindowFunction"):
        ws.process(Keyed())
    with pytest.raises(TypeError, match="AllWindowFunction"):
        ws.reduce(lambda a, b: a, window_function=Keyed())


def test_window_all_failing_function_fails_the_job_with_its_error():
    class Broken(ProcessAllWindowFunction):
        def process(self, context, elements):
            raise ValueError("broken window function")

    env = StreamExecutionEnvironment.get_execution_environment()
    out = env.from_collection([1, 2]).count_window_all(2).process(Broken())
    with pytest.raises(Exception, match="broken window function"):
        list(out.execute_and_collect())


def test_window_types_are_windows():
    from millstream.engine.windowing.windows import CountWindow, Window

    assert isinstance(TimeWindow(0, 1), Window) and isinstance(GlobalWindow(), Window) and isinstance(CountWindow(1), Window)
