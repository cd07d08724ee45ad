"""Deleting an event-time timer, and the OnTimerContext's time domain and current key."""
from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction


class ByField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Timers(KeyedProcessFunction):
    def process_element(self, value, ctx):
        service = ctx.timer_service()
        if value[2] == "set":
            service.register_event_time_timer(value[1] + 100)
            service.register_event_time_timer(value[1] + 200)
        else:
            service.delete_event_time_timer(value[1] + 100)
        return []

    def on_timer(self, timestamp, ctx):
        yield f"{ctx.get_current_key()} fired at {timestamp} in {ctx.time_domain()}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [(1, 0, "set"), (2, 0, "set"), (1, 0, "delete")]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.INT(), Types.LONG(), Types.STRING()]))
ds = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByField()))
ds.key_by(lambda v: v[0], key_type=Types.INT()).process(Timers(), output_type=Types.STRING()).print()
env.execute()
