"""A MapFunction on a keyed stream using ValueState through its RuntimeContext (a running count)."""
from pyflink.common import Types
from pyflink.datastream import RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.functions import MapFunction
from pyflink.datastream.state import ValueStateDescriptor


class Count(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def map(self, value):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        return value[0], n


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
words = ["apple", "pear", "apple", "fig", "pear", "apple"]
ds = env.from_collection([(w, 1) for w in words], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
out = ds.key_by(lambda v: v[0], key_type=Types.STRING()).map(
    Count(), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
for v in out.execute_and_collect():
    print(v)
