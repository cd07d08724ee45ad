"""window_all over tumbling event-time windows with a ProcessAllWindowFunction, and a reduce."""
from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessAllWindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows


class ByValue(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value


class Summary(ProcessAllWindowFunction):
    def process(self, context, elements):
        w = context.window()
        yield f"[{w.start}, {w.end}): {sorted(elements)}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 7, 3, 12, 15, 9, 2], type_info=Types.LONG()).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByValue()))
ds.window_all(TumblingEventTimeWindows.of(Time.milliseconds(10))).process(Summary(), Types.STRING()).print("all")
ds.window_all(TumblingEventTimeWindows.of(Time.milliseconds(5))).reduce(lambda a, b: a + b).print("sum")
env.execute()
