"""Event-time session windows whose gap comes from each element (SessionWindowTimeGapExtractor)."""
from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import EventTimeSessionWindows, SessionWindowTimeGapExtractor


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class GapFromRecord(SessionWindowTimeGapExtractor):
    def extract(self, element):
        return element[2]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
data = [("k", 0, 2), ("k", 1, 10), ("k", 9, 1), ("k", 30, 1), ("m", 2, 100), ("m", 90, 1)]
ds = env.from_collection(data, type_info=t).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
ds.key_by(lambda v: v[0]).window(EventTimeSessionWindows.with_dynamic_gap(GapFromRecord())) \
    .reduce(lambda a, b: (a[0], min(a[1], b[1]), a[2] + b[2]), output_type=t).print()
env.execute()
