"""Typed columns of heap state files (state_columns): exact round trips, what is refused, and the
merge of frames (each key's newest entry) against a plain dict replay."""
from __future__ import annotations

import enum
import math
import pickle
from collections import namedtuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millstream.engine.runtime.state import state_columns
from millstream.engine.runtime.state.heap_state_files import ABSENT, _raw_frames, _Slot, columns_frame, frames


def _round_trip(keys: list, values: list, gone: list = ()) -> tuple:
    c = state_columns.columns("s", keys, values, list(gone))
    assert c is not None
    frame = pickle.loads(state_columns.encode(c))
    assert state_columns.is_columns(frame)
    return state_columns.decode(frame).as_dict()


def _typed(d: dict) -> list:
    return [(type(k), k, type(v), tuple(map(type, v)) if type(v) is tuple else (), v) for k, v in d.items()]


@pytest.mark.parametrize(
    "values",
    [
        [0, 127, -128, 128, -129, 2**15, -(2**15) - 1, 2**31 - 1, -(2**31), 2**31, 2**63 - 1, -(2**63)],
        [0.5, -0.0, math.inf, -math.inf, 1e308, 5e-324, 0.1],
        [(1, 2.5), (-(2**63), -0.0), (2**40, math.inf)],
        [(7,), (8,), (9,)],
    ],
)
def test_numbers_read_back_as_the_very_values_and_types_written(values) -> None:
    keys = list(range(-len(values), 0))
    name, got, gone = _round_trip(keys, values, [2**62, -5000])
    assert name == "s"
    assert _typed(got) == _typed(dict(zip(keys, values)))
    assert gone == [2**62, -5000]


def test_nan_reads_back_as_nan() -> None:
    _, got, _ = _round_trip([1], [math.nan])
    assert math.isnan(got[1])


class Colour(enum.IntEnum):
    RED = 1


Pair = namedtuple("Pair", "a b")


@pytest.mark.parametrize(
    "keys, values",
    [
        ([1, 2], [True, 1]),  # a bool is not an int
        ([1, 2], [1, 2**63]),  # out of int64
        ([1, 2], [1, 1.5]),  # an int and a float in one column
        ([1, 2], [Colour.RED, 1]),  # an int subclass
        ([1, 2], [Pair(1, 2), (1, 2)]),  # a tuple subclass
        ([1, 2], [(1, 2), (1, 2, 3)]),  # tuples of two lengths
        ([1, 2], [(1, True), (1, 2)]),
        ([1, 2], [(), ()]),
        ([1, 2], ["a", "b"]),
        ([1, 2], [[1], [2]]),
        (["a", "b"], [1, 2]),  # keys that are not ints
        ([True, 2], [1, 2]),
        ([2**64, 2], [1, 2]),
    ],
)
def test_other_types_are_refused_and_pickled(keys, values) -> None:
    assert state_columns.columns("s", keys, values) is None
    # the writer's frame falls back to a pickle that reads back the same
    (name, got, gone), = frames(columns_frame("s", keys, values))
    assert _typed(got) == _typed(dict(zip(keys, values))) and gone == []


def test_narrow_widths_take_fewer_bytes_than_pickles() -> None:
    keys = list(range(100_000, 110_000))
    values = [(k, 3) for k in keys]
    typed = state_columns.encode(state_columns.columns("s", keys, values))
    pickled = pickle.dumps(("s", keys, values, []), pickle.HIGHEST_PROTOCOL)
    assert len(typed) < 0.7 * len(pickled)
    frame = pickle.loads(typed)
    assert frame[2][0] == "<i4" and frame[4] == (("<i4", frame[4][0][1]), ("<i1", frame[4][1][1]))


# A frame: a few puts (key -> value) and deletions, as a delta writes them (a key in one or the other).
_KEY = st.integers(-20, 20) | st.sampled_from([2**40, -(2**63)])
_INT = st.integers(-(2**63), 2**63 - 1)
_VALUE = st.one_of(st.integers(-100, 100), _INT, st.booleans(), st.text(max_size=2))


@st.composite
def _frame(draw, spec: str) -> tuple[dict, list]:
    puts = draw(st.dictionaries(_KEY, _INT if spec == "int" else st.tuples(st.integers(-5, 5), st.floats(allow_nan=False)), max_size=8))
    gone = draw(st.lists(_KEY.filter(lambda k: k not in puts), max_size=4, unique=True))
    if spec == "mixed" and puts:
        k = next(iter(puts))
        puts[k] = draw(_VALUE)
    return puts, gone


@settings(max_examples=200, deadline=None)
@given(spec=st.sampled_from(["int", "pair"]), data=st.data(), base=st.booleans())
def test_merge_of_columns_equals_a_dict_replay(spec, data, base) -> None:
    plain = data.draw(st.lists(_frame(spec), min_size=1, max_size=5))
    mixed = data.draw(st.lists(_frame("mixed"), max_size=2))
    sequence = plain + mixed
    # the reference: replayed in order into a dict and a set of deletions (kept unless it is a base)
    table: dict = {}
    deleted: set = set()
    for puts, gone in sequence:
        table.update(puts)
        deleted -= set(puts)
        for k in gone:
            table.pop(k, None)
        if not base:
            deleted |= set(gone)
    slot = _Slot(base)
    for puts, gone in sequence:
        # a deletion is a key whose value the writer found absent
        for frame in _raw_frames(columns_frame("s", [*puts, *gone], [*puts.values(), *[ABSENT] * len(gone)])):
            slot.add(frame)
    merged = slot.columns()
    if merged is not None:
        name, got, got_gone = merged.as_dict()
        assert not any(state_columns.columns("s", list(p), list(p.values())) is None for p, _ in sequence)
    else:
        got, got_gone = slot.table or {}, slot.gone
    assert _typed(dict(sorted(got.items()))) == _typed(dict(sorted(table.items())))
    assert set(got_gone) == (set() if base else deleted - set(table))
