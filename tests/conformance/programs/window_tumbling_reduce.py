"""Keyed tumbling event-time windows with a reduce (sum per key per 5 ms window)."""
from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
data = [("a", 1, 0), ("b", 2, 1), ("a", 3, 4), ("a", 4, 5), ("b", 5, 9), ("a", 6, 12), ("b", 7, 14)]
ds = env.from_collection(data, type_info=t).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
ds.key_by(lambda v: v[0], key_type=Types.STRING()) \
    .window(TumblingEventTimeWindows.of(Time.milliseconds(5))) \
    .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])), output_type=t) \
    .print()
env.execute()
