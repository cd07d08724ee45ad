"""RuntimeExecutionMode.BATCH: a keyed reduce and sum emit only the final value per key."""
from pyflink.common import Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(2)
t = Types.TUPLE([Types.STRING(), Types.INT()])
ds = env.from_collection([("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("a", 6)], type_info=t)
ds.key_by(lambda v: v[0], key_type=Types.STRING()).reduce(lambda a, b: (a[0], a[1] + b[1])).print("reduce")
ds.key_by(lambda v: v[0], key_type=Types.STRING()).sum(1).print("sum")
env.execute()
