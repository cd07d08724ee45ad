"""SQL_DATE, SQL_TIME and SQL_TIMESTAMP from Python date/time/datetime values, printed and collected."""
import datetime

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
row_type = Types.ROW([Types.SQL_DATE(), Types.SQL_TIME(), Types.SQL_TIMESTAMP()])
data = [(datetime.date(2024, 2, 29), datetime.time(13, 5, 9), datetime.datetime(2024, 2, 29, 13, 5, 9, 123000)),
        (datetime.date(1970, 1, 1), datetime.time(0, 0, 0), datetime.datetime(1999, 12, 31, 23, 59, 59))]
ds = env.from_collection(data, type_info=row_type)
ds.print("row")
env.from_collection([d for d, _, _ in data], type_info=Types.SQL_DATE()).print("date")
env.execute()
for row in ds.execute_and_collect():
    print("collected", [(type(v).__name__, str(v)) for v in row])
