"""print() of Rows whose fields are arrays and lists (PRIMITIVE_ARRAY, BASIC_ARRAY, OBJECT_ARRAY,
LIST), before and after a network exchange, next to SQL date and time fields."""
import datetime

from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

row_type = Types.ROW([Types.INT(), Types.PRIMITIVE_ARRAY(Types.INT()), Types.BASIC_ARRAY(Types.STRING()),
                      Types.OBJECT_ARRAY(Types.DOUBLE()), Types.LIST(Types.INT()), Types.SQL_DATE()])
data = [(1, [1, 2, 3], [None, "hi"], [0.5, 2.0], [7, 8], datetime.date(2021, 1, 9)),
        (2, [], ["x"], [1.25], [], datetime.date(2024, 2, 29))]

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(data, type_info=row_type)
ds.print("chained")
ds.rebalance().map(lambda r: r, output_type=row_type).print("after an exchange")
ds.rebalance().map(lambda r: Row(r[0] * 10, r[1], r[2], r[3], r[4], r[5]), output_type=row_type).print("rebuilt")
env.execute("row array fields")
