"""Sliding event-time windows (size 10, slide 5) with an AggregateFunction computing an average."""
from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import AggregateFunction
from pyflink.datastream.window import SlidingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class Avg(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, accumulator):
        return accumulator[0] + value[1], accumulator[1] + 1

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("s", 10, 1), ("s", 20, 6), ("t", 5, 7), ("s", 30, 12), ("t", 15, 13), ("s", 40, 21)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
ds.key_by(lambda v: v[0]) \
    .window(SlidingEventTimeWindows.of(Time.milliseconds(10), Time.milliseconds(5))) \
    .aggregate(Avg(), accumulator_type=Types.TUPLE([Types.INT(), Types.INT()]), output_type=Types.DOUBLE()) \
    .print()
env.execute()
