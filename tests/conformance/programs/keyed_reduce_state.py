"""A ReduceFunction on a keyed stream that also keeps ValueState (how many reductions per key)."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.functions import ReduceFunction
from pyflink.datastream.state import ValueStateDescriptor


class CountingSum(ReduceFunction):
    def open(self, runtime_context: RuntimeContext):
        self.calls = runtime_context.get_state(ValueStateDescriptor("calls", Types.INT()))

    def reduce(self, a, b):
        n = (self.calls.value() or 0) + 1
        self.calls.update(n)
        return a[0], a[1] + b[1], n


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()])
ds = env.from_collection([("a", 1, 0), ("b", 2, 0), ("a", 3, 0), ("a", 4, 0), ("b", 5, 0)], type_info=t)
ds.key_by(lambda v: v[0], key_type=Types.STRING()).reduce(CountingSum()).print()
env.execute()
