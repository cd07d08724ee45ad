"""Sliding count windows (size 3, slide 2) with a WindowFunction (apply) listing each window's contents."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import WindowFunction


class Contents(WindowFunction):
    def apply(self, key, window, inputs):
        yield f"{key}: {[v[1] for v in inputs]}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("p", 1), ("p", 2), ("q", 10), ("p", 3), ("p", 4), ("q", 20), ("p", 5), ("q", 30)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
ds.key_by(lambda v: v[0], key_type=Types.STRING()).count_window(3, 2) \
    .apply(Contents(), output_type=Types.STRING()).print()
env.execute()
