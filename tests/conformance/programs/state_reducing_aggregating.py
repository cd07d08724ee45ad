"""ReducingState and AggregatingState in a KeyedProcessFunction (running max and running average)."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import AggregateFunction, KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import AggregatingStateDescriptor, ReducingStateDescriptor


class Average(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, acc):
        return acc[0] + value, acc[1] + 1

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class Stats(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.max = runtime_context.get_reducing_state(
            ReducingStateDescriptor("max", lambda a, b: max(a, b), Types.INT()))
        self.avg = runtime_context.get_aggregating_state(
            AggregatingStateDescriptor("avg", Average(), Types.TUPLE([Types.INT(), Types.INT()])))

    def process_element(self, value, ctx):
        self.max.add(value[1])
        self.avg.add(value[1])
        yield f"{ctx.get_current_key()} max={self.max.get()} avg={self.avg.get():.2f}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("x", 4), ("y", 10), ("x", 9), ("x", 2), ("y", 1)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
ds.key_by(lambda v: v[0], key_type=Types.STRING()).process(Stats(), output_type=Types.STRING()).print()
env.execute()
