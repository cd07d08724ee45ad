"""apply() with a WindowFunction on tumbling event-time windows, keyed by an int, at parallelism 2."""
from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import WindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Total(WindowFunction):
    def apply(self, key, window, inputs):
        yield key, window.start, window.end, sum(v[2] for v in inputs)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
data = [(i % 3, i * 4, i) for i in range(12)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.INT(), Types.LONG(), Types.INT()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
out = ds.key_by(lambda v: v[0], key_type=Types.INT()).window(TumblingEventTimeWindows.of(Time.milliseconds(16))) \
    .apply(Total(), output_type=Types.TUPLE([Types.INT(), Types.LONG(), Types.LONG(), Types.INT()]))
for v in out.execute_and_collect():
    print(v)
