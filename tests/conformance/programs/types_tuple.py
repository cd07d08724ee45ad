"""TUPLE type info in and out; tuples printed by Flink's tuple format and collected in Python."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.LONG(), Types.BOOLEAN()])
ds = env.from_collection([("x", 1, True), ("y", 20, False)], type_info=t)
ds.print()
ds.map(lambda v: (v[0] * 2, v[1] * 3, not v[2]), output_type=t).print()
env.execute()
for v in ds.execute_and_collect():
    print("collected", v, type(v).__name__)
