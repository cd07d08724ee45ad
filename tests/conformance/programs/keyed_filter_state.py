"""A FilterFunction on a keyed stream with ValueState: keeps the first record of every key."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.functions import FilterFunction
from pyflink.datastream.state import ValueStateDescriptor


class FirstOfKey(FilterFunction):
    def open(self, runtime_context: RuntimeContext):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.BOOLEAN()))

    def filter(self, value):
        if self.seen.value():
            return False
        self.seen.update(True)
        return True


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([3, 1, 3, 2, 1, 3, 4], type_info=Types.INT())
ds.key_by(lambda x: x, key_type=Types.INT()).filter(FirstOfKey()).print()
env.execute()
