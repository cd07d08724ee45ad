"""A key selector that returns a list (PyFlink keys it by its pickle): reduce, sum and min_by per key,
streaming and batch."""
from pyflink.common import Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

data = [("a", 1, 3), ("b", 2, 1), ("a", 3, 2), ("b", 4, 5), ("a", 5, 1)]
t = Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()])

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(data, type_info=t)
ds.key_by(lambda v: [v[0]]).reduce(lambda a, b: (a[0], a[1] + b[1], b[2])).print("reduce")
ds.key_by(lambda v: [v[0], "x"]).sum(1).print("sum")
ds.key_by(lambda v: [1]).min_by(2).print("min_by")
env.execute("list keys, streaming")

batch = StreamExecutionEnvironment.get_execution_environment()
batch.set_runtime_mode(RuntimeExecutionMode.BATCH)
batch.set_parallelism(1)
batch.from_collection(data, type_info=t).key_by(lambda v: [v[0]]).sum(1).print("batch sum")
batch.execute("list keys, batch")
