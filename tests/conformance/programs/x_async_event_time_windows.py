"""AsyncDataStream.unordered_wait between watermarks and an event-time window: results come back in
any order but never overtake a watermark, so no result is late and every window counts all of its
records (results keep their input's timestamp)."""
import asyncio

from pyflink.common import Duration, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import AsyncDataStream, RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.functions import AsyncFunction, ProcessWindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows


class Stamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Enrich(AsyncFunction):
    async def async_invoke(self, value):
        # Later records finish first.
        await asyncio.sleep(0.002 * (40 - value[1] // 100 % 40))
        return [(value[0], value[1], value[1] // 1000)]


class CountWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        items = list(elements)
        yield "%s [%d, %d): %d records, seconds %s" % (
            key, context.window().start, context.window().end, len(items), sorted({e[2] for e in items}))


records = [("k%d" % (i % 2), i * 100) for i in range(60)]
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.set_runtime_mode(RuntimeExecutionMode.STREAMING)  # watermarks, as PyFlink's default
ds = env.from_collection(records, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(Stamp()))
enriched = AsyncDataStream.unordered_wait(
    ds, Enrich(), Time.seconds(10), 8, Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()]))
enriched.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(2))) \
    .process(CountWindow(), Types.STRING()).print()
env.execute()
