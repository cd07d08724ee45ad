"""Keyed tumbling event-time windows with a ProcessWindowFunction reading the window bounds."""
from typing import Iterable

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.window import TimeWindow, TumblingEventTimeWindows


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Describe(ProcessWindowFunction[tuple, str, str, TimeWindow]):
    def process(self, key: str, context: ProcessWindowFunction.Context, elements: Iterable[tuple]) -> Iterable[str]:
        w = context.window()
        values = sorted(e[1] for e in elements)
        yield f"{key} [{w.start}, {w.end}) max_ts={w.max_timestamp()} n={len(values)} ts={values}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
data = [("x", 1000), ("y", 1500), ("x", 2999), ("x", 3000), ("y", 4200), ("x", 7500)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.LONG()])).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
out = ds.key_by(lambda v: v[0], key_type=Types.STRING()) \
    .window(TumblingEventTimeWindows.of(Time.seconds(3))) \
    .process(Describe(), output_type=Types.STRING())
for line in out.execute_and_collect():
    print(line)
