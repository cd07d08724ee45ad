"""Types.INSTANT values made in a map from epoch milliseconds (PyFlink cannot ship Instant objects
through from_collection): printed by Flink and collected back."""
from pyflink.common import Instant, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
millis = env.from_collection([0, 1700000000005], type_info=Types.LONG())
ds = millis.map(lambda ms: Instant.of_epoch_milli(ms), output_type=Types.INSTANT())
ds.print("instant")
env.execute()
for v in ds.execute_and_collect():
    print("collected", type(v).__name__, v, v.to_epoch_milli())
