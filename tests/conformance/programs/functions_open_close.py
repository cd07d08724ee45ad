"""MapFunction, FlatMapFunction and FilterFunction classes with open(); results collected in order."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import FilterFunction, FlatMapFunction, MapFunction, RuntimeContext


class Scale(MapFunction):
    def __init__(self, factor):
        self.factor = factor
        self.offset = None

    def open(self, runtime_context: RuntimeContext):
        self.offset = 1000  # set on the worker, not in the client

    def map(self, value):
        return value * self.factor + self.offset


class Digits(FlatMapFunction):
    def flat_map(self, value):
        return [int(c) for c in str(value)]


class NonZero(FilterFunction):
    def filter(self, value):
        return value != 0


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 25, 302], type_info=Types.INT())
out = ds.map(Scale(3), output_type=Types.INT()).flat_map(Digits(), output_type=Types.INT()).filter(NonZero())
print(list(out.execute_and_collect()))
