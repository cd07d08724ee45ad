"""Several execute() calls on one environment: each runs only the sinks added since the last."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_collection([1, 2], type_info=Types.INT()).print("first")
result = env.execute("job one")
print("job one done:", result.get_job_id() is not None)
env.from_collection(["x", "y"], type_info=Types.STRING()).print("second")
env.execute("job two")
print("job two done")
