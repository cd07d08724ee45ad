"""min vs min_by and max vs max_by by position: min/max change one field, *_by keep the whole record."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.INT(), Types.STRING()])
data = [("k", 5, "first"), ("k", 3, "second"), ("k", 8, "third"), ("k", 3, "fourth"), ("j", 1, "only")]
ds = env.from_collection(data, type_info=t)
keyed = ds.key_by(lambda v: v[0], key_type=Types.STRING())
keyed.min(1).print("min")
keyed.min_by(1).print("min_by")
keyed.max(1).print("max")
keyed.max_by(1).print("max_by")
env.execute()
