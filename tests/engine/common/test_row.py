"""Row behaves as pyflink.common.Row (checked against PyFlink 2.3.0's Row)."""
import pickle

import pytest

from millstream.engine.common.row import Row, RowKind
from millstream.engine.common.types import RowKind as TypesRowKind
from millstream.engine.runtime.io.serialization import MsgpackSerializer


def test_repr_named_and_positional():
    assert repr(Row(name="Alice", age=11)) == "Row(name='Alice', age=11)"  # keyword order kept
    assert repr(Row(1, "a")) == "<Row(1, 'a')>"
    assert str(Row(1, "a")) == "<Row(1, 'a')>"


def test_field_access_by_name_index_and_attribute():
    r = Row(name="Alice", age=11)
    assert (r.name, r["age"], r[0], r[-1], r[0:1]) == ("Alice", 11, "Alice", 11, ["Alice"])
    assert "name" in r and "x" not in r and 11 not in r
    with pytest.raises(AttributeError):
        r.missing
    with pytest.raises(ValueError):
        r["missing"]
    assert 1 in Row(1, 2)  # a positional row searches its values
    assert not hasattr(Row(1), "_fields")


def test_rows_are_mutable_lists_not_tuples():
    r = Row(1, 2)
    r[0] = 5
    assert list(r) == [5, 2] and len(r) == 2
    assert not isinstance(r, tuple) and r != (5, 2)
    n = Row(a=1)
    n["a"] = 3
    assert n.a == 3
    with pytest.raises(AttributeError):
        n.a = 4  # PyFlink refuses attribute assignment


def test_equality_kind_and_names():
    assert Row(1, 2) == Row(1, 2)
    assert Row(a=1, b=2) == Row(b=2, a=1)  # named rows compare by name
    assert Row(a=1) != Row(1)
    assert Row.of_kind(RowKind.DELETE, 1) != Row(1)
    assert hash(Row(1, 2)) == hash((1, 2))


def test_kinds():
    r = Row(1)
    assert r.get_row_kind() is RowKind.INSERT and str(r.get_row_kind()) == "+I"
    r.set_row_kind(RowKind.UPDATE_AFTER)
    assert str(r.get_row_kind()) == "+U" and r._is_accumulate_msg() and not r._is_retract_msg()
    assert [str(k) for k in RowKind] == ["+I", "-U", "+U", "-D"]
    assert TypesRowKind is RowKind


def test_factory():
    Person = Row("name", "age")
    assert repr(Person) == "<Row('name', 'age')>" and "name" in Person
    alice = Person("Alice", 11)
    assert alice == Row(name="Alice", age=11) and alice.age == 11
    with pytest.raises(ValueError):
        Person(1, 2, 3)


def test_as_dict_and_fields_by_names():
    r = Row(key=1, value=Row(name="a", age=2))
    assert r.as_dict() == {"key": 1, "value": Row(name="a", age=2)}
    assert r.as_dict(True) == {"key": 1, "value": {"name": "a", "age": 2}}
    with pytest.raises(TypeError):
        Row(1).as_dict()
    assert Row(a=1, b=2).get_fields_by_names(["b", "a"]) == [2, 1]
    p = Row(1, 2)
    p.set_field_names(["x", "y"])
    assert p.y == 2


def test_names_and_kind_survive_pickle_and_the_data_plane():
    r = Row.of_kind(RowKind.DELETE, a=1, b=[1, 2])
    back = pickle.loads(pickle.dumps(r))
    assert back == r and back.get_row_kind() is RowKind.DELETE
    s = MsgpackSerializer()
    _, (wire, plain), _ = s.decode(s.encode(0, [r, Row(1, 2)]))
    assert wire.get_row_kind() is RowKind.DELETE and wire._fields == ["a", "b"] and wire.a == 1
    assert plain == Row(1, 2) and not hasattr(plain, "_fields")


def test_rows_pickled_before_kinds_still_load():
    from millstream.engine.common import row as row_module

    class OldNamedRow:  # what a named Row pickled as before: _make_named_row(fields, values)
        def __reduce__(self):
            return (row_module._make_named_row, (("a", "b"), (1, 2)))

    assert pickle.loads(pickle.dumps(OldNamedRow())) == Row(a=1, b=2)

def test_named_rows_equal_in_any_name_order_hash_and_key_alike() -> None:
    from millstream.engine.common.key_spec import key_spec
    from millstream.engine.common.typeinfo import Types
    from millstream.engine.runtime.key_hash import key_hash_code

    a, b = Row(a=1, b=2), Row(b=2, a=1)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert key_hash_code(a) == key_hash_code(b)
    spec = key_spec(Types.ROW_NAMED(["a", "b"], [Types.INT(), Types.INT()]))
    assert key_hash_code(a, spec) == key_hash_code(b, spec)
