"""Window reduce combined with a ProcessWindowFunction, and aggregate combined with a WindowFunction."""
from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import AggregateFunction, ProcessWindowFunction, WindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class WithWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        for e in elements:
            yield f"max of {key} in {context.window().start}: {e[2]}"


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + 1

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class Label(WindowFunction):
    def apply(self, key, window, inputs):
        for n in inputs:
            yield f"count of {key} in {window.start}: {n}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()])
data = [("a", 1, 5), ("a", 2, 9), ("b", 3, 1), ("a", 11, 4), ("b", 12, 8), ("b", 13, 2)]
ds = env.from_collection(data, type_info=t).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
windowed = ds.key_by(lambda v: v[0], key_type=Types.STRING()).window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
windowed.reduce(lambda a, b: a if a[2] >= b[2] else b, window_function=WithWindow(), output_type=Types.STRING()).print()
windowed.aggregate(Count(), window_function=Label(), accumulator_type=Types.INT(), output_type=Types.STRING()).print()
env.execute()
