"""A FlatMapFunction on a keyed stream with ListState: emits the key's history once it has three items."""
from pyflink.common import Types
from pyflink.datastream import RuntimeContext, StreamExecutionEnvironment
from pyflink.datastream.functions import FlatMapFunction
from pyflink.datastream.state import ListStateDescriptor


class Batch(FlatMapFunction):
    def open(self, runtime_context: RuntimeContext):
        self.items = runtime_context.get_list_state(ListStateDescriptor("items", Types.INT()))

    def flat_map(self, value):
        self.items.add(value[1])
        got = list(self.items.get())
        if len(got) == 3:
            self.items.clear()
            yield f"{value[0]}: {got}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", 1), ("b", 10), ("a", 2), ("a", 3), ("b", 20), ("a", 4), ("b", 30), ("a", 5), ("a", 6)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
ds.key_by(lambda v: v[0]).flat_map(Batch(), output_type=Types.STRING()).print()
env.execute()
