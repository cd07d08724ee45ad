"""Types.INSTANT values (pyflink.common.Instant): printed by Flink and collected back."""
from pyflink.common import Instant, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([Instant(0, 0), Instant(1700000000, 5000)], type_info=Types.INSTANT())
ds.print("instant")
env.execute()
for v in ds.execute_and_collect():
    print("collected", type(v).__name__, v, v.to_epoch_milli())
