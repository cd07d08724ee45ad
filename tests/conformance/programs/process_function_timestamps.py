"""A ProcessFunction reading ctx.timestamp() before and after assign_timestamps_and_watermarks."""
from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessFunction


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value * 1000


class Show(ProcessFunction):
    def __init__(self, label):
        self.label = label

    def process_element(self, value, ctx):
        yield f"{self.label} {value} ts={ctx.timestamp()}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([3, 1, 2], type_info=Types.LONG())
ds.process(Show("before"), output_type=Types.STRING()).print()
ds.assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())) \
    .process(Show("after"), output_type=Types.STRING()).print()
env.execute()
