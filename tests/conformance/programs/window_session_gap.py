"""Event-time session windows with a fixed gap; a ProcessWindowFunction reports each session."""
from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.window import EventTimeSessionWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Session(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield f"user {key}: {w.start}-{w.end} clicks={len(list(elements))}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("u1", 1), ("u1", 3), ("u2", 4), ("u1", 20), ("u1", 24), ("u2", 8), ("u2", 30), ("u1", 9)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
ds.key_by(lambda v: v[0]).window(EventTimeSessionWindows.with_gap(Time.milliseconds(5))) \
    .process(Session(), output_type=Types.STRING()).print()
env.execute()
