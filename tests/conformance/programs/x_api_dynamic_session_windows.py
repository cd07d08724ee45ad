"""Session windows with a per-element gap (SessionWindowTimeGapExtractor), generic ProcessWindowFunction[...]."""
from typing import Iterable, Tuple

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.window import (
    DynamicEventTimeSessionWindows,
    EventTimeSessionWindows,
    SessionWindowTimeGapExtractor,
    TimeWindow,
)


class Stamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Gap(SessionWindowTimeGapExtractor):
    def extract(self, element: Tuple[str, int, int]) -> int:
        return element[2]


class Sessions(ProcessWindowFunction[Tuple[str, int, int], str, str, TimeWindow]):
    def process(self, key: str, context: ProcessWindowFunction.Context, elements: Iterable[Tuple[str, int, int]]):
        w = context.window()
        yield f"{key} [{w.start}, {w.end}) {len(list(elements))}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
data = [("a", 0, 100), ("a", 50, 100), ("a", 400, 100), ("b", 10, 1000), ("b", 900, 10), ("a", 450, 500), ("a", 1200, 100)]
ds = env.from_collection(data, type_info=t).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Stamp())
)
keyed = ds.key_by(lambda v: v[0], key_type=Types.STRING())
keyed.window(EventTimeSessionWindows.with_dynamic_gap(Gap())).process(Sessions(), Types.STRING()).print("dyn")
keyed.window(DynamicEventTimeSessionWindows.with_dynamic_gap(Gap())).process(Sessions(), Types.STRING()).print("cls")
env.execute("dynamic_sessions")
