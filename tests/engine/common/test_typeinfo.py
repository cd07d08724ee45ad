"""Types: PyFlink's reprs and equality, and what a value of each type becomes (``coerce``),
as recorded from PyFlink 2.3.0 (what a map function downstream of from_collection received)."""
import datetime
from decimal import Decimal

import pytest

from millstream.engine.common.row import Row, RowKind
from millstream.engine.common.typeinfo import Types


def test_reprs_and_equality():
    assert repr(Types.INT()) == "Integer" and repr(Types.STRING()) == "String"
    assert repr(Types.ROW_NAMED(["a"], [Types.INT()])) == "RowTypeInfo(a: Integer)"
    assert repr(Types.TUPLE([Types.STRING(), Types.INT()])) == "TupleTypeInfo(String, Integer)"
    assert repr(Types.LIST(Types.INT())) == "ListTypeInfo<Integer>"
    assert repr(Types.MAP(Types.STRING(), Types.INT())) == "MapTypeInfo<String, Integer>"
    assert repr(Types.PICKLED_BYTE_ARRAY()) == "PickledByteArrayTypeInfo"
    assert repr(Types.SQL_DATE()) == "DateTypeInfo"
    assert Types.ROW([Types.INT()]) == Types.ROW_NAMED(["x"], [Types.INT()])  # PyFlink compares types only
    assert Types.TUPLE([Types.INT()]) != Types.ROW([Types.INT()])
    assert Types.ROW([Types.INT(), Types.STRING()]).get_field_names() == ["f0", "f1"]


def test_row_named_gives_rows_with_field_names():
    r = Types.ROW_NAMED(["word", "n"], [Types.STRING(), Types.INT()]).coerce(("a", 1))
    assert isinstance(r, Row) and r.word == "a" and r.n == 1 and repr(r) == "Row(word='a', n=1)"
    assert Types.ROW([Types.STRING()]).coerce(["a"]) == Row(f0="a")


def test_row_keeps_kind_and_reads_dicts():
    t = Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.INT()])
    assert t.coerce(Row.of_kind(RowKind.DELETE, 1, 2)).get_row_kind() is RowKind.DELETE
    assert t.coerce({"b": 2, "a": 1}) == Row(a=1, b=2)
    assert t.coerce(Row(b=2, a=1)) == Row(a=1, b=2)


def test_tuple_list_and_nested():
    t = Types.TUPLE([Types.STRING(), Types.LIST(Types.INT())])
    assert t.coerce(["a", (1, 2)]) == ("a", [1, 2])  # msgpack's tuples become the declared list
    assert Types.PRIMITIVE_ARRAY(Types.INT()).coerce((1, 2)) == [1, 2]
    assert Types.MAP(Types.STRING(), Types.LIST(Types.INT())).coerce({"a": (1,)}) == {"a": [1]}


def test_numbers():
    assert Types.FLOAT().coerce(0.1) == 0.10000000149011612  # PyFlink hands back the 32-bit float
    assert Types.DOUBLE().coerce(1) == 1.0 and isinstance(Types.DOUBLE().coerce(1), float)
    assert Types.BIG_DEC().coerce(Decimal("1.50")) == Decimal("1.50")
    assert Types.SQL_TIMESTAMP().coerce(datetime.datetime(2024, 1, 2)) == datetime.datetime(2024, 1, 2)


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="fields"):
        Types.TUPLE([Types.STRING(), Types.INT()]).coerce(("a",))
    with pytest.raises(ValueError, match="tuple"):
        Types.TUPLE([Types.STRING()]).coerce(5)
