"""map and filter on plain Python values, no type information; print() sink at parallelism 1."""
# conformance: ordered
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 2, 3, 4, 5, 6])
ds.map(lambda x: x * 10).filter(lambda x: x % 20 == 0).print()
env.execute("basic_map_filter")
