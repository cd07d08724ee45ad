"""BATCH mode: a ReduceFunction that keeps keyed state of its own (opened with the runtime
context), whose state is per key; only each key's final value is printed."""
from pyflink.common import Row, Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.functions import ReduceFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor


class CountingConcat(ReduceFunction):
    def __init__(self):
        self.calls = None

    def open(self, runtime_context: RuntimeContext):
        self.calls = runtime_context.get_state(ValueStateDescriptor("calls", Types.INT()))

    def reduce(self, a, b):
        n = (self.calls.value() or 0) + 1
        self.calls.update(n)
        return Row(a[0] + b[0], a[1], n)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(2)
ds = env.from_collection([("a", 0, 0), ("c", 1, 0), ("d", 1, 0), ("b", 0, 0), ("e", 1, 0), ("f", 2, 0)],
                         type_info=Types.ROW([Types.STRING(), Types.INT(), Types.INT()]))
ds.key_by(lambda r: r[1], key_type=Types.INT()).reduce(CountingConcat()).print()
env.execute("batch reduce with keyed state")
