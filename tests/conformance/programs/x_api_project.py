"""DataStream.project on tuples, and force_non_parallel."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
t = Types.TUPLE([Types.STRING(), Types.INT(), Types.DOUBLE()])
ds = env.from_collection([("a", 1, 1.5), ("b", 2, 2.5), ("c", 3, 3.5)], type_info=t)
# Sinks at parallelism 1: no subtask prefixes (which subtask a rebalanced record reaches is random in Flink).
ds.project(2, 0).print("p20").set_parallelism(1)
ds.project(1).print("p1").set_parallelism(1)
single = ds.map(lambda v: v[0], output_type=Types.STRING()).force_non_parallel()
try:
    single.set_parallelism(2)
    print("set_parallelism(2) on a non-parallel operator: accepted")
except Exception:
    print("set_parallelism(2) on a non-parallel operator: refused")
single.print("single").set_parallelism(1)
env.execute("project")
