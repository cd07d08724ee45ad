"""Broadcast state: a KeyedBroadcastProcessFunction stores rules from the broadcast side and applies
them to buffered keyed elements in an event-time timer (after both inputs are done)."""
from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedBroadcastProcessFunction, RuntimeContext
from pyflink.datastream.state import ListStateDescriptor, MapStateDescriptor

rules = MapStateDescriptor("rules", Types.STRING(), Types.INT())


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return 5


class Apply(KeyedBroadcastProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.pending = runtime_context.get_list_state(ListStateDescriptor("pending", Types.INT()))

    def process_element(self, value, ctx):
        self.pending.add(value[1])
        ctx.timer_service().register_event_time_timer(10)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(rules).put(value[0], value[1])

    def on_timer(self, timestamp, ctx):
        factor = ctx.get_broadcast_state(rules).get(ctx.get_current_key())
        yield f"{ctx.get_current_key()}: {[v * (factor or 0) for v in self.pending.get()]}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())
data = env.from_collection([("a", 1), ("b", 2), ("a", 3), ("c", 4)],
                           type_info=Types.TUPLE([Types.STRING(), Types.INT()])).assign_timestamps_and_watermarks(wm)
factors = env.from_collection([("a", 10), ("b", 100)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
result = data.key_by(lambda v: v[0], key_type=Types.STRING()).connect(factors.broadcast(rules)).process(
    Apply(), output_type=Types.STRING())
for line in result.execute_and_collect():
    print(line)
