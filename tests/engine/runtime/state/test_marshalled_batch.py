"""A reduce's batches logged as marshal's bytes (``marshalled_batch``): exactly the batches that
``state_columns.columns`` reads as int64/float64 columns with every int in int32's range are logged,
they read back as the same columns, and everything else (a bool, an int beyond int32, a numpy scalar,
which marshal writes as bytes, an IntEnum, a list, a string) is refused for the other ways."""
from __future__ import annotations

import enum
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from millstream.engine.runtime.state import change_log, marshalled_batch, state_columns
from millstream.engine.runtime.state.change_log import ChangeLog, Refs
from millstream.engine.runtime.state.heap_incremental import TrackedTable, batch_access
from millstream.engine.runtime.state.marshalled_batch import Marshalled


class Colour(enum.IntEnum):
    RED = 1


def _same(a: state_columns.Columns, b: state_columns.Columns) -> None:
    assert a.name == b.name and a.spec == b.spec
    assert a.keys.dtype == b.keys.dtype == np.int64 and a.keys.tolist() == b.keys.tolist()
    assert len(a.cols) == len(b.cols)
    for x, y in zip(a.cols, b.cols):
        assert x.dtype == y.dtype
        assert x.tobytes() == y.tobytes()  # bit for bit: -0.0 and NaN too
    assert len(a.gone) == len(b.gone) == 0


@pytest.mark.parametrize(
    "values",
    [
        [3, -7, 0],
        [1.5, -0.0, math.nan],
        [(1, 2), (3, 4), (5, -6)],
        [(1, 2.5, -3), (4, math.inf, 6), (7, 8.0, 9)],
        [(2**31 - 1,), (-(2**31),), (0,)],
        [tuple(range(16))] * 3,
    ],
)
def test_numbers_keyed_by_ints_are_logged_and_read_back_as_the_columns_would_be(values) -> None:
    keys = [10, -2**31, 2**31 - 1]
    m = marshalled_batch.dump("t", keys, values)
    assert type(m) is Marshalled and m.count == 3
    (got,) = marshalled_batch.decoded([m])
    _same(got, state_columns.columns("t", keys, values))
    back_keys, back_values = marshalled_batch.objects(m)
    assert back_keys == keys and [type(k) for k in back_keys] == [int] * 3
    assert repr(back_values) == repr(values)


@pytest.mark.parametrize(
    "keys, values",
    [
        ([1, True], [1, 2]),  # a bool key
        ([1, 2], [1, True]),  # a bool value
        ([1, 2], [(1, False), (2, 3)]),
        ([1, 2**31], [1, 2]),  # a key beyond int32: columns, not this
        ([1, 2], [1, 2**40]),
        ([1, 2], [np.int64(1), 2]),  # marshal writes a numpy scalar as bytes
        ([1, 2], [(1, np.float64(2.0)), (2, 3.0)]),
        ([1, 2], [Colour.RED, 1]),
        ([1, 2], [[1, 2], [3, 4]]),  # mutable
        ([1, 2], [(1, (2, 3)), (4, (5, 6))]),  # nested
        ([1, 2], [(1, 2), (3,)]),  # arity differs
        ([1, 2], [(1, 2), (3.0, 4)]),  # a field's type differs
        ([1, 2], [1, 2.0]),
        ([1, 2], [(), ()]),
        ([1, 2], [tuple(range(17))] * 2),
        ([1, 2], ["a", "b"]),
        ([1, 2], [None, None]),
        ([1, "a"], [1, 2]),
        (["a", "b"], [1, 2]),
        ([1.0, 2], [1, 2]),
        # as long in marshal's bytes as what they stand beside: only the code bytes tell them apart
        ([1, b""], [1, 2]),
        ([1, 2], [1, b""]),
        ([1, 2], [1.0, np.int32(7)]),
        ([1, 2], [(1, 2), (3, b"")]),
    ],
)
def test_anything_else_is_refused(keys, values) -> None:
    assert marshalled_batch.dump("t", keys, values) is None


def test_runs_of_one_layout_are_read_as_one_frame_in_order() -> None:
    a = marshalled_batch.dump("t", [1, 2], [(1, 1), (2, 1)])
    b = marshalled_batch.dump("t", [1, 3], [(1, 2), (3, 1)])
    c = marshalled_batch.dump("t", [4], [4.0])
    refs = Refs(["x"], [1])
    out = marshalled_batch.decoded([a, b, refs, c, a])
    assert [type(x).__name__ for x in out] == ["Columns", "Refs", "Columns", "Columns"]
    assert out[0].keys.tolist() == [1, 2, 1, 3] and out[0].cols[1].tolist() == [1, 1, 2, 1]
    assert out[1] is refs and out[2].spec == "d" and out[3].spec == ("q", "q")


def test_a_logged_table_reads_its_newest_values_and_its_keys_back() -> None:
    log = ChangeLog()
    log.add_marshalled(marshalled_batch.dump("t", [5, 6], [(5, 1), (6, 1)]))
    log.add(state_columns.columns("t", [2**40], [(2**40, 1)]))  # beyond int32: columns
    log.add_marshalled(marshalled_batch.dump("t", [5], [(5, 2)]))
    assert log.keys() == [5, 6, 2**40, 5] and len(log) == 4
    keys, (cols,) = change_log.newest([log])
    assert keys.tolist() == [5, 6, 2**40]
    assert cols.values() == [(5, 2), (6, 1), (2**40, 1)]
    log.add_refs(["s"], [("s", 1)])
    assert change_log.newest_objects([log]) == {5: (5, 2), 6: (6, 1), 2**40: (2**40, 1), "s": ("s", 1)}


def test_a_reduce_batch_of_counts_goes_into_the_log_as_bytes() -> None:
    """The task thread's way: without this module the batch would be columns again."""
    t = TrackedTable("counts", False)
    for k in range(10):
        dict.__setitem__(t, k, (k, 0))
    t.log = ChangeLog()
    keys = [1, 2, 3]
    get, put, record = batch_access(t, keys)
    out = []
    for k in keys:
        nv = (k, get(k)[1] + 1)
        put(k, nv)
        out.append(nv)
    record(keys, out)
    assert [type(b) for b in t.log.batches] == [Marshalled]
    record([4], [(4, True)])  # a bool: columns refuse it too, so it is logged as objects
    assert [type(b) for b in t.log.batches] == [Marshalled, Refs]
    assert change_log.newest_objects([t.log]) == {1: (1, 1), 2: (2, 1), 3: (3, 1), 4: (4, True)}


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**40), 2**40), st.booleans()), min_size=1, max_size=20),
    data=st.data(),
)
def test_logged_exactly_when_columns_in_int32_would_be_and_read_back_the_same(keys, data) -> None:
    n = len(keys)
    arity = data.draw(st.integers(0, 3))
    leaf = st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**40), 2**40), st.floats(allow_nan=True), st.booleans())
    if arity == 0:
        values = data.draw(st.lists(leaf, min_size=n, max_size=n))
    else:
        values = data.draw(st.lists(st.tuples(*[leaf] * arity), min_size=n, max_size=n))
    m = marshalled_batch.dump("t", keys, values)
    cols = state_columns.columns("t", keys, values)
    in_int32 = all(
        type(x) is not int or -(2**31) <= x < 2**31
        for x in [*keys, *(f for v in values for f in (v if type(v) is tuple else (v,)))]
    )
    assert (m is not None) == (cols is not None and in_int32)
    if m is not None:
        (got,) = marshalled_batch.decoded([m])
        _same(got, cols)
        k, v = marshalled_batch.objects(m)
        assert [(type(x), x) for x in k] == [(type(x), x) for x in keys]
        assert repr(v) == repr(values)
