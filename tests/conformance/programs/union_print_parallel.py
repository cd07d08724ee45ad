"""union of three streams, printed with an identifier at parallelism 2 (subtask prefixes)."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
a = env.from_collection([1, 2, 3], type_info=Types.INT())
b = env.from_collection([10, 20], type_info=Types.INT())
c = env.from_collection([100], type_info=Types.INT())
a.union(b, c).map(lambda x: x + 1, output_type=Types.INT()).key_by(lambda x: x % 2, key_type=Types.INT()).map(
    lambda x: x, output_type=Types.INT()).print("u")
env.execute()
