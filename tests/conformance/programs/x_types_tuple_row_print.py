"""print() of tuples and rows: nested, with kinds, lists, maps, decimals, dates and None."""
import datetime
from decimal import Decimal

from pyflink.common import Row, Types
from pyflink.common.types import RowKind
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
S, I, DBL = Types.STRING(), Types.INT(), Types.DOUBLE()
cases = [
    ("tuple", Types.TUPLE([S, I]), [("a", 15), ["b", 2]]),
    ("nested", Types.TUPLE([S, Types.TUPLE([I, DBL])]), [("a", (1, 2.5))]),
    ("tlist", Types.TUPLE([S, Types.LIST(I), Types.PRIMITIVE_ARRAY(I)]), [("a", [1, 2], [3])]),
    ("trow", Types.TUPLE([S, Types.ROW([I])]), [("a", Row(1))]),
    ("tmix", Types.TUPLE([Types.BIG_DEC(), Types.FLOAT(), Types.SQL_DATE(), Types.BOOLEAN()]),
     [(Decimal("1.5"), 0.1, datetime.date(2024, 1, 2), True)]),
    ("row", Types.ROW([S, I]), [Row("a", 1), ("b", 2)]),
    ("named", Types.ROW_NAMED(["name", "n"], [S, I]), [Row(name="c", n=3), ("d", 4)]),
    ("kinds", Types.ROW([S, I]), [Row.of_kind(RowKind.DELETE, "a", 1), Row.of_kind(RowKind.UPDATE_BEFORE, "b", 2),
                                  Row.of_kind(RowKind.UPDATE_AFTER, "c", 3)]),
    ("rnested", Types.ROW([S, Types.ROW([I, DBL])]), [Row("a", Row(1, 2.0))]),
    ("rlist", Types.ROW([S, Types.LIST(I), Types.PRIMITIVE_ARRAY(I), Types.MAP(S, I)]), [Row("a", [1, 2], [3, 4], {"k": 1})]),
    ("rnone", Types.ROW([S, I]), [Row("a", None), Row(None, 2)]),
    ("rdec", Types.ROW([S, I, Types.BIG_DEC()]), [Row("cfgs", 5, Decimal("3"))]),
    ("rtime", Types.ROW([Types.SQL_DATE(), Types.SQL_TIME(), Types.SQL_TIMESTAMP()]),
     [Row(datetime.date(2024, 1, 2), datetime.time(1, 2, 3), datetime.datetime(2024, 1, 2, 3, 4, 5, 6000))]),
]
for name, type_info, values in cases:
    env.from_collection(values, type_info=type_info).print(name)
env.execute()
