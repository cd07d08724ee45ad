"""Event-time timers in a KeyedProcessFunction: timestamps from a WatermarkStrategy, on_timer output."""
from pyflink.common import Duration, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Alarm(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.sum = runtime_context.get_state(ValueStateDescriptor("sum", Types.INT()))

    def process_element(self, value, ctx):
        self.sum.update((self.sum.value() or 0) + value[2])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        yield f"element {value} ts={ctx.timestamp()}"

    def on_timer(self, timestamp, ctx):
        yield f"timer {ctx.get_current_key()} at {timestamp} sum={self.sum.value()}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", 1, 1), ("b", 3, 10), ("a", 5, 2), ("a", 30, 3), ("b", 31, 20)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(ByField()))
ds.key_by(lambda v: v[0], key_type=Types.STRING()).process(Alarm(), output_type=Types.STRING()).print()
env.execute()
