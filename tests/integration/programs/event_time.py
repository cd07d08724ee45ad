"""Event time, windows and timers through PyFlink's API; prints {case: sorted results} as JSON.

Usage: event_time.py CASE [CASE...]; cases: tumbling sliding session late count timers
"""
import json
import sys

from pyflink.common import Duration, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import (
    AggregateFunction,
    KeyedProcessFunction,
    OutputTag,
    ProcessWindowFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
    WindowFunction,
)
from pyflink.datastream.state import MapStateDescriptor
from pyflink.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)

sys.path.insert(0, __import__("os").path.dirname(__file__))
import event_data  # noqa: E402  (shared with the test, which computes the expected results)


class SecondField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


def bounded(ms):
    return WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(ms)).with_timestamp_assigner(SecondField())


class WithWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        for e in elements:
            yield [key, w.start, w.end, *e[2:]] if isinstance(e, tuple) and len(e) > 2 else [key, w.start, w.end, e]


class CountAndSum(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return acc[0] + 1, acc[1] + value[2]

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class SessionSummary(ProcessWindowFunction):
    def process(self, key, context, elements):
        elements = list(elements)
        yield [key, context.window().start, context.window().end, len(elements), sum(e[2] for e in elements)]


class CountPerWindow(WindowFunction):
    def apply(self, key, window, inputs):
        yield ["main", key, window.end, len(list(inputs))]


class BucketCounter(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.counts = runtime_context.get_map_state(MapStateDescriptor("counts", Types.LONG(), Types.LONG()))

    def process_element(self, value, ctx):
        bucket = value[1] - value[1] % 1000
        if not self.counts.contains(bucket):
            ctx.timer_service().register_event_time_timer(bucket + 999)
        self.counts.put(bucket, (self.counts.get(bucket) or 0) + 1)

    def on_timer(self, timestamp, ctx):
        bucket = timestamp - 999
        yield [ctx.get_current_key(), bucket, self.counts.get(bucket)]
        self.counts.remove(bucket)


def run(case):
    env = StreamExecutionEnvironment.get_execution_environment()
    if case == "tumbling":
        s = env.from_collection(event_data.EVENTS).assign_timestamps_and_watermarks(bounded(500))
        out = (s.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(1)))
               .reduce(lambda a, b: (a[0], a[1], a[2] + b[2]), window_function=WithWindow()))
    elif case == "sliding":
        s = env.from_source(event_data.events_source(), bounded(500), "events")
        out = (s.key_by(lambda e: e[0]).window(SlidingEventTimeWindows.of(Time.seconds(2), Time.milliseconds(500)))
               .aggregate(CountAndSum(), window_function=WithWindow()))
    elif case == "session":
        s = env.from_collection(event_data.SESSION_EVENTS).assign_timestamps_and_watermarks(bounded(500))
        out = s.key_by(lambda e: e[0]).window(EventTimeSessionWindows.with_gap(Time.milliseconds(300))).process(SessionSummary())
    elif case == "late":
        tag = OutputTag("late")
        # The assigner runs beside the (non-parallel) source, so the late records reach it in a
        # later batch than the records that advanced the watermark past them.
        s = env.from_collection(event_data.LATE_EVENTS).assign_timestamps_and_watermarks(
            WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(SecondField())).set_parallelism(1)
        main = (s.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(1)))
                .side_output_late_data(tag).apply(CountPerWindow()))
        out = main.union(main.get_side_output(tag).map(lambda e: ["late", e[0], e[1], e[2]]))
    elif case == "count":
        s = env.from_collection(event_data.COUNT_EVENTS)
        tumbling = s.key_by(lambda e: e[0]).count_window(3).reduce(lambda a, b: (a[0], a[1] + b[1]))
        sliding = s.key_by(lambda e: e[0]).count_window(4, 2).reduce(lambda a, b: (a[0], a[1] + b[1]))
        out = tumbling.map(lambda e: ["tumbling", e[0], e[1]]).union(sliding.map(lambda e: ["sliding", e[0], e[1]]))
    elif case == "timers":
        s = env.from_collection(event_data.EVENTS).assign_timestamps_and_watermarks(bounded(500))
        out = s.key_by(lambda e: e[0]).process(BucketCounter())
    else:
        raise SystemExit(f"unknown case {case}")
    return sorted(json.loads(json.dumps(list(out.execute_and_collect(case)))))


print(json.dumps({case: run(case) for case in sys.argv[1:]}))
