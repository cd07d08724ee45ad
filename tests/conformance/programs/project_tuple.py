"""project() picks and reorders fields of a TUPLE stream."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.INT(), Types.DOUBLE(), Types.BOOLEAN()])
ds = env.from_collection([("a", 1, 0.5, True), ("b", 2, 1.5, False)], type_info=t)
ds.project(2, 0).print("2,0")
ds.project(1).print("1")
env.execute()
