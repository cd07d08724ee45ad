"""print() of basic and SQL time types from from_collection(type_info=...): Java's forms."""
import datetime
from decimal import Decimal

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
cases = [
    ("string", Types.STRING(), ["a", "b c"]),
    ("int", Types.INT(), [1, -2]),
    ("long", Types.LONG(), [2**40]),
    ("short", Types.SHORT(), [-300]),
    ("byte", Types.BYTE(), [-5]),
    ("bool", Types.BOOLEAN(), [True, False]),
    ("float", Types.FLOAT(), [0.1, 1e10, 123456.789, 1e-5, 3.0]),
    ("double", Types.DOUBLE(), [0.1, 1e7, 1e-4, 123456789.123, 1.0 / 3, float("nan"), float("-inf")]),
    ("dec", Types.BIG_DEC(), [Decimal("1.50"), Decimal("1E+3"), Decimal("1E-7")]),
    ("date", Types.SQL_DATE(), [datetime.date(2024, 1, 2)]),
    ("time", Types.SQL_TIME(), [datetime.time(13, 4, 5, 678000)]),
    ("ts", Types.SQL_TIMESTAMP(), [datetime.datetime(2024, 1, 2, 3, 4, 5, 678000), datetime.datetime(2024, 1, 2, 3, 4, 5)]),
    ("map", Types.MAP(Types.STRING(), Types.INT()), [{"a": 1, "b": 2, "zz": 3, "hello": 4, "x1": 5}]),
]
for name, type_info, values in cases:
    env.from_collection(values, type_info=type_info).print(name)
env.execute()
