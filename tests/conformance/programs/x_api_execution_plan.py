"""env.get_execution_plan(): Flink's StreamGraph JSON as PyFlink prints it (node ids, fused Python
operators "Map, Filter", ship strategies, sinks last, Jackson's layout). No key_by here: PyFlink adds
an internal Python operator for it that Millstream does not have."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
a = env.from_collection([1, 2, 3], type_info=Types.INT())
b = env.from_collection([4, 5], type_info=Types.INT())
a.map(lambda x: x + 1, output_type=Types.INT()).filter(lambda x: x > 1).shuffle().map(lambda x: x, output_type=Types.INT()).print()
(
    a.union(b).rescale().filter(lambda x: True).set_parallelism(4)
    .broadcast().map(lambda x: x, output_type=Types.INT()).name("after broadcast").print()
)
a.flat_map(lambda x: [x], output_type=Types.INT()).map(lambda x: x, output_type=Types.INT()).disable_chaining().print()
print(env.get_execution_plan())
