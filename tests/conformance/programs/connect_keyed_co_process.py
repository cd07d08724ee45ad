"""Two keyed streams connected with a KeyedCoProcessFunction joining orders and payments by id,
emitting from an event-time timer once both inputs are complete."""
from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedCoProcessFunction, RuntimeContext
from pyflink.datastream.state import ListStateDescriptor


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return 1


class Join(KeyedCoProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.orders = runtime_context.get_list_state(ListStateDescriptor("orders", Types.STRING()))
        self.paid = runtime_context.get_list_state(ListStateDescriptor("paid", Types.INT()))

    def process_element1(self, value, ctx):
        self.orders.add(value[1])
        ctx.timer_service().register_event_time_timer(100)

    def process_element2(self, value, ctx):
        self.paid.add(value[1])
        ctx.timer_service().register_event_time_timer(100)

    def on_timer(self, timestamp, ctx):
        yield f"order {ctx.get_current_key()}: {sorted(self.orders.get())} paid {sum(self.paid.get())}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())
orders = env.from_collection([(1, "book"), (2, "pen"), (1, "lamp"), (3, "cup")],
                             type_info=Types.TUPLE([Types.INT(), Types.STRING()])).assign_timestamps_and_watermarks(wm)
payments = env.from_collection([(1, 30), (2, 2), (1, 5)],
                               type_info=Types.TUPLE([Types.INT(), Types.INT()])).assign_timestamps_and_watermarks(wm)
joined = orders.connect(payments).key_by(lambda o: o[0], lambda p: p[0], key_type=Types.INT())
for line in joined.process(Join(), output_type=Types.STRING()).execute_and_collect():
    print(line)
