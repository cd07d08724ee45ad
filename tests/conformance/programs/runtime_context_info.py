"""RuntimeContext getters inside a MapFunction: subtask index, parallelism, task name, job parameters."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import MapFunction, RuntimeContext


class Info(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        self.text = (f"subtasks={runtime_context.get_number_of_parallel_subtasks()} "
                     f"max={runtime_context.get_max_number_of_parallel_subtasks()} "
                     f"attempt={runtime_context.get_attempt_number()} "
                     f"param={runtime_context.get_job_parameter('mode', 'none')} "
                     f"missing={runtime_context.get_job_parameter('nope', 'default')}")
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        return f"{value} {self.text}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.set_max_parallelism(16)
env.get_config().set_global_job_parameters({"mode": "test"})
ds = env.from_collection(["a", "b", "c"], type_info=Types.STRING())
for line in ds.map(Info(), output_type=Types.STRING()).execute_and_collect():
    print(line)
