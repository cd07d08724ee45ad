"""LIST, BASIC_ARRAY and PRIMITIVE_ARRAY type info: values printed by Flink and collected back."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
lists = env.from_collection([[1, 2, 3], []], type_info=Types.LIST(Types.INT()))
strings = env.from_collection([["a", "b"], ["c"]], type_info=Types.BASIC_ARRAY(Types.STRING()))
longs = env.from_collection([[7, 8]], type_info=Types.PRIMITIVE_ARRAY(Types.LONG()))
lists.map(lambda v: v + [len(v)], output_type=Types.LIST(Types.INT())).print("list")
strings.print("basic_array")
longs.print("primitive_array")
env.execute()
print("collected", sorted(lists.execute_and_collect()))
