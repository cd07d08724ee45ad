"""Key selectors that return lists (PyFlink keys them by their pickle) in a keyed process function
with state and timers, in count and event-time windows, and in a keyed co-process function: each
list is one key, and user functions see it as a list."""
from typing import Iterable

from pyflink.common import Time, Types
from pyflink.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedCoProcessFunction, KeyedProcessFunction, ProcessWindowFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor
from pyflink.datastream.window import TumblingEventTimeWindows


class Second(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return value[1]


class Running(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.INT()))

    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        ctx.timer_service().register_event_time_timer(100)
        yield f"process {ctx.get_current_key()} {total}"

    def on_timer(self, timestamp, ctx: KeyedProcessFunction.OnTimerContext):
        yield f"timer {ctx.get_current_key()} {self.total.value()}"


class Show(ProcessWindowFunction):
    def process(self, key, context: ProcessWindowFunction.Context, elements: Iterable[tuple]):
        yield f"window {key} {context.window()} {sorted(e[1] for e in elements)}"


class Both(KeyedCoProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.INT()))

    def process_element1(self, value, ctx: KeyedCoProcessFunction.Context):
        self.seen.update((self.seen.value() or 0) + value[1])
        yield f"co1 {ctx.get_current_key()} {value[1]}"

    def process_element2(self, value, ctx: KeyedCoProcessFunction.Context):
        self.seen.update((self.seen.value() or 0) + value[1])
        yield f"co2 {ctx.get_current_key()} {value[1]}"
        ctx.timer_service().register_event_time_timer(200)

    def on_timer(self, timestamp, ctx: KeyedCoProcessFunction.OnTimerContext):
        yield f"co timer {ctx.get_current_key()} {self.seen.value()}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = env.from_collection([("a", 1), ("b", 2), ("a", 3), ("a", 12), ("b", 4)],
                           type_info=Types.TUPLE([Types.STRING(), Types.INT()])) \
    .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Second()))
data.key_by(lambda x: [x[0], "k"]).process(Running(), Types.STRING()).print()
data.key_by(lambda x: [x[0]]).count_window(2).process(Show(), Types.STRING()).print()
data.key_by(lambda x: [x[0]]).window(TumblingEventTimeWindows.of(Time.milliseconds(10))) \
    .process(Show(), Types.STRING()).print()
data.connect(data).key_by(lambda x: [x[0]], lambda x: [x[0]]).process(Both(), Types.STRING()).print()
env.execute("list_keys_keyed_operators")
