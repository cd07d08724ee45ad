"""RuntimeExecutionMode.BATCH with event-time tumbling windows and a keyed process function."""
from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction
from pyflink.datastream.window import TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Tag(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield f"{ctx.get_current_key()}:{value[2]}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.LONG(), Types.INT()])
data = [("a", 1, 1), ("a", 12, 2), ("b", 3, 3), ("a", 5, 4), ("b", 14, 5)]
ds = env.from_collection(data, type_info=t).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
ds.key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(Time.milliseconds(10))) \
    .reduce(lambda a, b: (a[0], max(a[1], b[1]), a[2] + b[2]), output_type=t).print("window")
ds.key_by(lambda v: v[0]).process(Tag(), Types.STRING()).print("process")
env.execute()
