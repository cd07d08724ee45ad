"""One environment, several executions (issue 12, item 2): streams stay usable after execute() and
execute_and_collect(); a job runs the sinks added since the last execution and what feeds them;
a print() declared before execute_and_collect() is dropped, never run."""
import sys

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 2, 3], type_info=Types.INT())
shared = ds.map(lambda x: x * 10, output_type=Types.INT())
shared.print("pending")
with shared.map(lambda x: x + 1, output_type=Types.INT()).execute_and_collect() as it:
    print("collect 1:", sorted(it))
print("collect 2:", sorted(shared.filter(lambda x: x > 10).execute_and_collect()))
sys.stdout.flush()
shared.map(lambda x: -x, output_type=Types.INT()).print("second")
env.execute("second")
sys.stdout.flush()
try:
    env.execute("nothing new")
    print("third ran")
except Exception:
    print("third refused")
shared.print("fourth")
env.execute("fourth")
sys.stdout.flush()
print("limit:", shared.execute_and_collect(limit=2))
