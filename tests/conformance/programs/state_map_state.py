"""MapState in a KeyedProcessFunction: put/get/contains/remove/keys/values/items/is_empty."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor


class Inventory(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.stock = runtime_context.get_map_state(MapStateDescriptor("stock", Types.STRING(), Types.INT()))

    def process_element(self, value, ctx):
        shop, item, delta = value
        if delta == 0:
            self.stock.remove(item)
        else:
            self.stock.put(item, (self.stock.get(item) if self.stock.contains(item) else 0) + delta)
        yield (f"{shop}: keys={sorted(self.stock.keys())} values={sorted(self.stock.values())} "
               f"items={sorted(self.stock.items())} empty={self.stock.is_empty()}")


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.STRING(), Types.INT()])
data = [("s1", "nut", 3), ("s2", "bolt", 1), ("s1", "bolt", 2), ("s1", "nut", 4), ("s1", "nut", 0),
        ("s2", "bolt", 0)]
ds = env.from_collection(data, type_info=t)
ds.key_by(lambda v: v[0]).process(Inventory(), output_type=Types.STRING()).print()
env.execute()
