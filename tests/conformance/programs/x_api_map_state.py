"""MapState's Python mapping protocol: in, [k], [k] = v, del, iteration over keys/values/items, is_empty."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor


class Words(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.seen = runtime_context.get_map_state(MapStateDescriptor("seen", Types.STRING(), Types.INT()))

    def process_element(self, value, ctx):
        key, word = value
        was_empty = self.seen.is_empty()
        if word.startswith("-"):
            gone = word[1:]
            present = gone in self.seen
            if present:
                del self.seen[gone]
            yield f"{key}: removed {gone} present={present} empty_now={self.seen.is_empty()}"
            return
        self.seen[word] = (self.seen[word] if word in self.seen else 0) + 1
        # PyFlink's put_all iterates (key, value) pairs (a dict there fails): pairs work in both.
        self.seen.put_all([("total", (self.seen.get("total") or 0) + 1)])
        keys = sorted(k for k in self.seen)
        items = sorted(self.seen.items())
        values = sorted(self.seen.values())
        yield f"{key}: was_empty={was_empty} keys={keys} items={items} values={values} contains={self.seen.contains(word)}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("x", "a"), ("x", "b"), ("y", "a"), ("x", "a"), ("x", "-b"), ("y", "-z"), ("y", "-a"), ("x", "c")]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.STRING()]))
ds.key_by(lambda v: v[0], key_type=Types.STRING()).process(Words(), output_type=Types.STRING()).print()
env.execute("map_state")
