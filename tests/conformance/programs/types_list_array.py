"""LIST, BASIC_ARRAY and PRIMITIVE_ARRAY as output types of maps (PyFlink's from_collection cannot
take Python lists for LIST). Lists are printed by Flink; arrays only collected, since Java prints an
array as its identity ([J@1b2c3d)."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
sizes = env.from_collection([3, 0, 2], type_info=Types.INT())
sizes.map(lambda n: list(range(n)), output_type=Types.LIST(Types.INT())).print("list")
env.execute()
arrays = sizes.map(lambda n: (["s"] * n, [n, n * 2]),
                   output_type=Types.TUPLE([Types.BASIC_ARRAY(Types.STRING()), Types.PRIMITIVE_ARRAY(Types.LONG())]))
for v in arrays.execute_and_collect():
    print("collected", v)
