"""key_by on a tuple field, then sum/min/max by position: the rolling aggregates per record."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()])
data = [("a", 1, 9), ("b", 5, 1), ("a", 3, 4), ("a", 2, 7), ("b", 1, 8)]
ds = env.from_collection(data, type_info=t)
ds.key_by(lambda v: v[0]).sum(1).print("sum")
ds.key_by(lambda v: v[0]).min(2).print("min")
ds.key_by(lambda v: v[0]).max(2).print("max")
env.execute()
