"""A (non-keyed) BroadcastProcessFunction: the broadcast side reaches every parallel instance."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import BroadcastProcessFunction
from pyflink.datastream.state import MapStateDescriptor

config = MapStateDescriptor("config", Types.STRING(), Types.STRING())


class Tag(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield f"data {value}"

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(config).put(value, value.upper())
        yield f"config {value}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
data = env.from_collection([1, 2, 3], type_info=Types.INT())
settings = env.from_collection(["x", "y"], type_info=Types.STRING()).broadcast(config)
for line in data.connect(settings).process(Tag(), output_type=Types.STRING()).execute_and_collect():
    print(line)
