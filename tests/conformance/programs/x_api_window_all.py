"""window_all with process, reduce + ProcessAllWindowFunction, aggregate + AllWindowFunction, apply."""
from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import (
    AggregateFunction,
    AllWindowFunction,
    ProcessAllWindowFunction,
)
from pyflink.datastream.window import CountTrigger, PurgingTrigger, TumblingEventTimeWindows


class Stamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Collect(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield "process", context.window().start, context.window().end, sorted(e[0] for e in elements)


class Tag(ProcessAllWindowFunction):
    def process(self, context, elements):
        for e in elements:
            yield "reduce", context.window().start, e


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value[1]

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class Apply(AllWindowFunction):
    def apply(self, window, inputs):
        yield "apply", window.start, sum(1 for _ in inputs)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", 100), ("b", 900), ("c", 1200), ("d", 1999), ("e", 2500), ("f", 4100)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.LONG()])).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Stamp())
)
windows = TumblingEventTimeWindows.of(Time.seconds(1))
ds.window_all(windows).process(Collect()).print()
ds.window_all(windows).reduce(lambda a, b: (a[0] + b[0], max(a[1], b[1])), window_function=Tag()).print()
ds.window_all(windows).aggregate(Count(), window_function=Apply()).print()
ds.window_all(windows).trigger(PurgingTrigger.of(CountTrigger.of(1))).apply(Apply()).print()
env.execute("window_all")
