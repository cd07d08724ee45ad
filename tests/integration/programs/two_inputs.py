"""connect(), KeyedCoProcessFunction and broadcast state through PyFlink's API; prints JSON results.

Results are emitted from event-time timers that fire when both inputs have
ended, so they do not depend on how the two inputs interleave.
"""
import json

from pyflink.common import Types
from pyflink.datastream import (
    CoMapFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
)
from pyflink.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

END = 10**15
RULES = MapStateDescriptor("rules", Types.STRING(), Types.PICKLED_BYTE_ARRAY())


class Describe(CoMapFunction):
    def map1(self, value):
        return ["number", value * 10]

    def map2(self, value):
        return ["word", len(value)]


class Join(KeyedCoProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.name = runtime_context.get_state(ValueStateDescriptor("name", Types.STRING()))
        self.orders = runtime_context.get_list_state(ListStateDescriptor("orders", Types.INT()))

    def process_element1(self, value, ctx):
        self.orders.add(value[1])
        ctx.timer_service().register_event_time_timer(END)

    def process_element2(self, value, ctx):
        self.name.update(value[1])
        ctx.timer_service().register_event_time_timer(END)

    def on_timer(self, timestamp, ctx):
        yield [ctx.get_current_key(), self.name.value(), sorted(self.orders.get())]


class ApplyRules(KeyedBroadcastProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen", Types.INT()))

    def process_element(self, value, ctx):
        self.seen.add(value[1])
        ctx.timer_service().register_event_time_timer(END)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])

    def on_timer(self, timestamp, ctx):
        rules = ctx.get_broadcast_state(RULES)
        if ctx.get_current_key() == rules.get("blocked"):
            return
        for v in self.seen.get():
            if v % rules.get("divisor") == 0:
                yield [ctx.get_current_key(), v]


out = {}
env = StreamExecutionEnvironment.get_execution_environment()
out["co_map"] = sorted(env.from_collection([1, 2, 3]).connect(env.from_collection(["a", "bb"])).map(Describe()).execute_and_collect("co-map"))

env = StreamExecutionEnvironment.get_execution_environment()
orders = env.from_collection([("c%d" % (i % 4), i) for i in range(20)])
customers = env.from_collection([("c0", "ada"), ("c1", "bob"), ("c2", "cy"), ("c3", "di")])
joined = orders.connect(customers).key_by(lambda o: o[0], lambda c: c[0]).process(Join())
out["join"] = sorted(joined.execute_and_collect("join"))

env = StreamExecutionEnvironment.get_execution_environment()
rules = env.from_collection([("divisor", 3), ("blocked", "k2")]).broadcast(RULES)
events = env.from_collection([("k%d" % (i % 5), i) for i in range(60)])
out["broadcast"] = sorted(events.key_by(lambda e: e[0]).connect(rules).process(ApplyRules()).execute_and_collect("rules"))
print(json.dumps(out))
