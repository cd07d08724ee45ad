"""sum() with the default position on a stream of plain ints keyed by parity, collected."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 2, 3, 4, 5, 6], type_info=Types.INT())
print(list(ds.key_by(lambda x: x % 2, key_type=Types.INT()).sum().execute_and_collect()))
