"""One environment, four executions sharing a source and a map (issue 12, item 2), at parallelism 2.

execute_and_collect, then execute_async (waited for), then execute_and_collect again, then execute:
each job runs what was added since the previous one plus what feeds it. The print() declared
before the first execute_and_collect is dropped (as PyFlink 2.3 does), never printed.
"""
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
source = env.from_collection(list(range(10)))
doubled = source.map(lambda x: 2 * x)
doubled.map(lambda x: f"pending {x}").print()
print("collect 1:", sorted(doubled.execute_and_collect()), flush=True)
doubled.map(lambda x: f"async {x + 1}").print()
client = env.execute_async("async job")
client.get_job_execution_result().result()
print("async done", flush=True)
print("collect 2:", sorted(doubled.filter(lambda x: x > 10).execute_and_collect()), flush=True)
source.map(lambda x: f"last {x}").print()
env.execute("last job")
