"""execute_async() returns a JobClient: wait for its result and compare the job ids. (Asking a
finished local job for its status fails in PyFlink: its mini-cluster is gone.)"""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_collection([1, 2, 3], type_info=Types.INT()).map(lambda x: x * 3, output_type=Types.INT()).print()
client = env.execute_async("async job")
result = client.get_job_execution_result().result()
print("same job id:", str(result.get_job_id()) == str(client.get_job_id()))
