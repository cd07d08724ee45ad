"""print() with and without an identifier at parallelism 2 after key_by: the subtask prefixes."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
ds = env.from_collection([("a", 1), ("b", 2), ("c", 3), ("d", 4)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
keyed = ds.key_by(lambda v: v[0], key_type=Types.STRING()).map(lambda v: v[1], output_type=Types.INT())
keyed.print()
keyed.print("ids")
env.execute()
