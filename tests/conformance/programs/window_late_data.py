"""allowed_lateness and side_output_late_data on a bounded, out-of-order source. With periodic
watermarks (every 200 ms) the whole collection usually passes before the first one, so nothing is
late; what counts is that the calls are accepted and the windows fire as PyFlink's do."""
from pyflink.common import Duration, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows

late = OutputTag("late", Types.TUPLE([Types.STRING(), Types.LONG()]))


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Fire(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield f"{key} window {context.window().start}: {sorted(e[1] for e in elements)}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("k", 1), ("k", 4), ("k", 12), ("k", 3), ("k", 25), ("k", 2), ("k", 40)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(ByField()))
result = ds.key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(Time.milliseconds(10))) \
    .allowed_lateness(10).side_output_late_data(late).process(Fire(), output_type=Types.STRING())
result.print("fired")
result.get_side_output(late).print("late")
env.execute()
