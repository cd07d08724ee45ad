"""execute_and_collect with a limit returns a list of the first records."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(list(range(100)), type_info=Types.INT())
first = ds.map(lambda x: x * x, output_type=Types.INT()).execute_and_collect(limit=5)
print(type(first).__name__, first)
named = ds.filter(lambda x: x % 7 == 0).execute_and_collect("sevens", limit=3)
print(named)
