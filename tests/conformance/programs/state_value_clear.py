"""ValueState.clear() and ListState.update()/add_all() in a KeyedProcessFunction."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor


class Session(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.INT()))
        self.parts = runtime_context.get_list_state(ListStateDescriptor("parts", Types.INT()))

    def process_element(self, value, ctx):
        if value[1] < 0:
            yield f"{value[0]} closed total={self.total.value()} parts={list(self.parts.get())}"
            self.total.clear()
            self.parts.update([])
            return
        self.total.update((self.total.value() or 0) + value[1])
        self.parts.add_all([value[1], value[1] * 10])
        yield f"{value[0]} open total={self.total.value()}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("u", 1), ("v", 5), ("u", 2), ("u", -1), ("u", 7), ("v", -1), ("v", 3)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
ds.key_by(lambda v: v[0], key_type=Types.STRING()).process(Session(), output_type=Types.STRING()).print()
env.execute()
