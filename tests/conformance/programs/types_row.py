"""from_collection with ROW type info; map keeping ROW; printed as Flink prints rows."""
from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
row_type = Types.ROW([Types.INT(), Types.STRING(), Types.DOUBLE()])
ds = env.from_collection([(1, "a", 1.5), (2, "b", 2.25), (3, None, -0.5)], type_info=row_type)
ds.print()
ds.map(lambda r: Row(r[0] * 2, (r[1] or "?").upper(), r[2] + 1), output_type=row_type).print()
env.execute()
