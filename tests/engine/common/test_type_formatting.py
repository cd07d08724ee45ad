"""print()'s forms per declared type. Every expected string was printed by PyFlink 2.3.0
(from_collection(..., type_info=T).print() or a map with output_type=T, parallelism 1)."""
import datetime
from decimal import Decimal

import pytest

from millstream.engine.common.row import Row, RowKind
from millstream.engine.common.time import Instant
from millstream.engine.common.java_hash_map import java_hash_map_order, pickled_dict_order
from millstream.engine.common.type_formatting import format_record, java_double, java_float
from millstream.engine.common.typeinfo import Types

D = Decimal
CASES = [
    (Types.STRING(), ["a", "b c", ""], ["a", "b c", ""]),
    (Types.INT(), [1, -2, 0], ["1", "-2", "0"]),
    (Types.LONG(), [2**40, -1], ["1099511627776", "-1"]),
    (Types.BOOLEAN(), [True, False], ["true", "false"]),
    (Types.BYTE(), [1, -5], ["1", "-5"]),
    (Types.SHORT(), [3, -300], ["3", "-300"]),
    (
        Types.FLOAT(),
        [0.1, 1.5, 1e10, 3.0, 1e-5, 123456.789, 0.001, 1e7, 9999999.0],
        ["0.1", "1.5", "1.0E10", "3.0", "1.0E-5", "123456.79", "0.001", "1.0E7", "9999999.0"],
    ),
    (
        Types.DOUBLE(),
        [0.1, 1e7, 1e-4, 123456789.123, 3.0, 1e-3, 9999999.0, 1e21, 1.0 / 3, -0.0,
         float("nan"), float("inf"), float("-inf"), 1e100],
        ["0.1", "1.0E7", "1.0E-4", "1.23456789123E8", "3.0", "0.001", "9999999.0", "1.0E21",
         "0.3333333333333333", "-0.0", "NaN", "Infinity", "-Infinity", "1.0E100"],
    ),
    (
        Types.BIG_DEC(),
        [D("3"), D("1.50"), D("1E+3"), D("-0.000001"), D("1E-7"), D("123.456")],
        ["3", "1.50", "1E+3", "-0.000001", "1E-7", "123.456"],
    ),
    (Types.SQL_DATE(), [datetime.date(2024, 1, 2)], ["2024-01-02"]),
    (Types.SQL_TIME(), [datetime.time(1, 2, 3), datetime.time(13, 4, 5, 678000)], ["01:02:03", "13:04:05"]),
    (
        Types.SQL_TIMESTAMP(),
        [datetime.datetime(2024, 1, 2, 3, 4, 5, 678000), datetime.datetime(2024, 1, 2, 3, 4, 5),
         datetime.datetime(2024, 1, 2, 3, 4, 5, 123456)],
        ["2024-01-02 03:04:05.678", "2024-01-02 03:04:05.0", "2024-01-02 03:04:05.123"],
    ),
    (Types.MAP(Types.STRING(), Types.INT()), [{"a": 1, "b": 2, "zz": 3, "hello": 4, "x1": 5}],
     ["{zz=3, a=1, x1=5, b=2, hello=4}"]),
    (Types.TUPLE([Types.STRING(), Types.INT()]), [("a", 15), ["b", 2]], ["(a,15)", "(b,2)"]),
    (Types.TUPLE([Types.STRING(), Types.TUPLE([Types.INT(), Types.DOUBLE()])]), [("a", (1, 2.5))], ["(a,(1,2.5))"]),
    (Types.TUPLE([Types.STRING(), Types.LIST(Types.INT())]), [("a", [1, 2])], ["(a,[1, 2])"]),
    (Types.TUPLE([Types.STRING(), Types.PRIMITIVE_ARRAY(Types.INT())]), [("a", [1, 2])], ["(a,[1, 2])"]),
    (Types.TUPLE([Types.STRING(), Types.ROW([Types.INT()])]), [("a", Row(1))], ["(a,+I[1])"]),
    (Types.TUPLE([Types.BIG_DEC(), Types.FLOAT(), Types.SQL_DATE(), Types.BOOLEAN()]),
     [(D("1.5"), 0.1, datetime.date(2024, 1, 2), True)], ["(1.5,0.1,2024-01-02,true)"]),
    (Types.ROW([Types.STRING(), Types.INT()]), [Row("a", 1), ("b", 2)], ["+I[a,1]", "+I[b,2]"]),
    (Types.ROW_NAMED(["name", "n"], [Types.STRING(), Types.INT()]), [Row(name="a", n=1), ("b", 2)],
     ["+I[a,1]", "+I[b,2]"]),
    (Types.ROW([Types.STRING(), Types.INT()]),
     [Row.of_kind(RowKind.DELETE, "a", 1), Row.of_kind(RowKind.UPDATE_BEFORE, "b", 2),
      Row.of_kind(RowKind.UPDATE_AFTER, "c", 3)], ["-D[a,1]", "-U[b,2]", "+U[c,3]"]),
    # A Row stream is printed by PyFlink in Python: str() of each field, so nested rows and
    # lists show as Python objects.
    (Types.ROW([Types.STRING(), Types.ROW([Types.INT(), Types.DOUBLE()])]),
     [Types.ROW([Types.STRING(), Types.ROW([Types.INT(), Types.DOUBLE()])]).coerce(Row("a", Row(1, 2.0)))],
     ["+I[a,Row(f0=1, f1=2.0)]"]),  # as from_collection delivers it: the nested row has Java's names
    (Types.ROW([Types.STRING(), Types.LIST(Types.INT()), Types.PRIMITIVE_ARRAY(Types.INT()),
                Types.MAP(Types.STRING(), Types.INT())]), [Row("a", [1, 2], [3, 4], {"k": 1})],
     ["+I[a,[1, 2],[3, 4],{'k': 1}]"]),
    (Types.ROW([Types.STRING(), Types.INT()]), [Row("a", None), Row(None, 2)], ["+I[a,None]", "+I[None,2]"]),
    (Types.ROW([Types.STRING(), Types.INT(), Types.BIG_DEC()]), [Row("cfgs", 5, D("3"))], ["+I[cfgs,5,3]"]),
    (Types.ROW([Types.SQL_DATE(), Types.SQL_TIME(), Types.SQL_TIMESTAMP()]),
     [Row(datetime.date(2024, 1, 2), datetime.time(1, 2, 3), datetime.datetime(2024, 1, 2, 3, 4, 5, 6000))],
     ["+I[2024-01-02,01:02:03,2024-01-02 03:04:05.006000]"]),
    # Records of no declared type print with Python's str.
    (None, [("a", 1), Row("a", 1), Row(w="a", n=1), [1, 2], "x"],
     ["('a', 1)", "<Row('a', 1)>", "Row(w='a', n=1)", "[1, 2]", "x"]),
    (Types.PICKLED_BYTE_ARRAY(), [("a", 1)], ["('a', 1)"]),
    # A Python function's int for DOUBLE and float for FLOAT (map with output_type).
    (Types.DOUBLE(), [1, 2], ["1.0", "2.0"]),
    (Types.FLOAT(), [0.1, 0.2, 0.30000000000000004], ["0.1", "0.2", "0.3"]),
    (Types.LIST(Types.STRING()), [["a"]], ["[a]"]),
    # From map functions with these output types.
    (Types.ROW([Types.STRING(), Types.FLOAT(), Types.BOOLEAN(), Types.LONG()]), [Row("x", 0.1, True, 2**40)],
     ["+I[x,0.1,True,1099511627776]"]),
    (Types.INSTANT(), [Instant.of_epoch_milli(1704164645678), Instant.of_epoch_milli(1704164645000)],
     ["2024-01-02T03:04:05.678Z", "2024-01-02T03:04:05Z"]),
]


@pytest.mark.parametrize("type_info,values,expected", CASES, ids=[repr(c[0]) for c in CASES])
def test_printed_like_pyflink(type_info, values, expected):
    assert [format_record(v, type_info) for v in values] == expected


def test_top_level_arrays_print_as_java_arrays():
    # PyFlink printed [I@722cde82 and [Ljava.lang.String;@27bd29f8: class name and identity hash.
    assert format_record([1, 2], Types.PRIMITIVE_ARRAY(Types.INT())).startswith("[I@")
    assert format_record(["a"], Types.BASIC_ARRAY(Types.STRING())).startswith("[Ljava.lang.String;@")


def test_java_number_forms():
    assert java_double(5e-3) == "0.005"
    assert java_double(-123.0) == "-123.0"
    assert java_double(1.5e-7) == "1.5E-7"
    assert java_double(12345678.9) == "1.23456789E7"
    assert java_float(16777217.0) == "1.6777216E7"


def test_hash_map_order_buckets_then_insertion():
    items = [("a", 1), ("b", 2), ("zz", 3), ("hello", 4), ("x1", 5)]
    assert [k for k, _ in java_hash_map_order(items, Types.STRING())] == ["zz", "a", "x1", "b", "hello"]


def test_dicts_from_from_collection_reach_java_reordered():
    # PyFlink printed {17=q, 1=a, 3=c, 20=t} for from_collection([{3: 'c', 1: 'a', 20: 't', 17: 'q'}], MAP(INT, STRING)).
    t = Types.MAP(Types.INT(), Types.STRING())
    arrived = dict(pickled_dict_order([(3, "c"), (1, "a"), (20, "t"), (17, "q")]))
    assert format_record(arrived, t) == "{17=q, 1=a, 3=c, 20=t}"
