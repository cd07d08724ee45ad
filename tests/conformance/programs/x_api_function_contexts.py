"""The context types of (keyed) broadcast and keyed process functions, as type hints and isinstance targets."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
)
from pyflink.datastream.state import MapStateDescriptor

RULES = MapStateDescriptor("rules", Types.STRING(), Types.STRING())


class Broadcast(BroadcastProcessFunction):
    def process_element(self, value, ctx: BroadcastProcessFunction.ReadOnlyContext):
        # Whether the rule arrived first is a race between the two inputs; only the types are printed.
        yield f"bp element {value} ro={isinstance(ctx, BroadcastProcessFunction.ReadOnlyContext)}"

    def process_broadcast_element(self, value, ctx: BroadcastProcessFunction.Context):
        ctx.get_broadcast_state(RULES).put("rule", value)
        yield f"bp broadcast {value} rw={isinstance(ctx, BroadcastProcessFunction.Context)}"


class KeyedBroadcast(KeyedBroadcastProcessFunction):
    def process_element(self, value, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext):
        ok = isinstance(ctx, KeyedBroadcastProcessFunction.ReadOnlyContext)
        yield f"kbp element {value} key={ctx.get_current_key()} ro={ok}"

    def process_broadcast_element(self, value, ctx: KeyedBroadcastProcessFunction.Context):
        yield f"kbp broadcast {value} rw={isinstance(ctx, KeyedBroadcastProcessFunction.Context)}"


class Keyed(KeyedProcessFunction):
    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        ctx.timer_service().register_event_time_timer(10)
        yield f"kp element {value} ctx={isinstance(ctx, KeyedProcessFunction.Context)}"

    def on_timer(self, timestamp, ctx: KeyedProcessFunction.OnTimerContext):
        yield f"kp timer {timestamp} key={ctx.get_current_key()} on_timer_ctx={isinstance(ctx, KeyedProcessFunction.OnTimerContext)}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
rules = env.from_collection(["r1"], type_info=Types.STRING())
values = env.from_collection(["v1"], type_info=Types.STRING())
values.connect(rules.broadcast(RULES)).process(Broadcast(), output_type=Types.STRING()).print()
keyed = env.from_collection(["k1"], type_info=Types.STRING()).key_by(lambda v: v, key_type=Types.STRING())
keyed.connect(rules.broadcast(RULES)).process(KeyedBroadcast(), output_type=Types.STRING()).print()
keyed.process(Keyed(), output_type=Types.STRING()).print()
env.execute("function_contexts")
