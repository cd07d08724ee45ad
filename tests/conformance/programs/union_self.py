"""A stream unioned with itself and with a mapped copy of itself: every record arrives each time."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(["x", "y"], type_info=Types.STRING())
ds.union(ds, ds.map(lambda s: s.upper(), output_type=Types.STRING())).print()
env.execute()
