"""RuntimeExecutionMode.BATCH with count windows (a reduce and a WindowFunction): in BATCH a keyed
stream reaches its windows sorted by key, and a window that never fills never fires. (Real PyFlink
2.3.0 did not finish BATCH programs with event-time windows behind a Python TimestampAssigner
within 10 minutes, so batch_mode_window has no fixture.)"""
from typing import Iterable

from pyflink.common import Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.functions import WindowFunction


class Collect(WindowFunction):
    def apply(self, key, window, inputs: Iterable[tuple]):
        yield f"{key}: {sorted(i[1] for i in inputs)}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.INT()])
data = [("a", 1), ("b", 2), ("a", 3), ("b", 4), ("a", 5), ("c", 6), ("b", 7), ("a", 8)]
ds = env.from_collection(data, type_info=t)
ds.key_by(lambda v: v[0], key_type=Types.STRING()).count_window(2) \
    .reduce(lambda a, b: (a[0], a[1] + b[1]), output_type=t).print("sum")
ds.key_by(lambda v: v[0], key_type=Types.STRING()).count_window(3).apply(Collect(), Types.STRING()).print("apply")
env.execute()
