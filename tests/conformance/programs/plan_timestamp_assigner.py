"""get_execution_plan() of assign_timestamps_and_watermarks: with a Python TimestampAssigner and with a
strategy that has none, after a Python map (PyFlink fuses the two Python functions) or straight after
the source, each followed by keyed and unkeyed Python functions."""
from pyflink.common import Duration, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Echo(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value[0]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
t = Types.TUPLE([Types.STRING(), Types.LONG()])
with_assigner = env.from_collection([("a", 1), ("b", 2)], type_info=t).map(lambda v: v, t).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
with_assigner.key_by(lambda v: v[0], key_type=Types.STRING()).process(Echo(), Types.STRING()).print()
without_assigner = env.from_collection([("c", 3)], type_info=t).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5)))
without_assigner.map(lambda v: v[0], Types.STRING()).print()
print(env.get_execution_plan())
