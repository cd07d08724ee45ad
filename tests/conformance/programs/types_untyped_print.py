"""Values with no type information (pickled) reaching the print() sink: what each Python value prints as."""
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
values = [1, 2.5, "text", None, True, (1, "a"), [1, 2], {"k": "v"}, 10 ** 20]
env.from_collection(values).map(lambda v: v).print()
env.execute()
