"""Text columns of heap state files (string_columns): exact round trips of string-keyed state, what is
refused (and then pickled), and frames of them replayed by compaction and restores like any other."""
from __future__ import annotations

import pickle
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millstream.engine.runtime.state import string_arrays, string_columns
from millstream.engine.runtime.state.heap_state_files import ABSENT, _raw_frames, _Slot, columns_frame, frames
from millstream.engine.common.row import Row


@pytest.fixture(autouse=True)
def small_frames_too(monkeypatch) -> None:
    """Frames of any size as text columns here (the writer keeps small ones pickled)."""
    monkeypatch.setattr(string_columns, "MIN_ENTRIES", 0)


def test_a_small_frame_stays_a_pickle(monkeypatch) -> None:
    monkeypatch.setattr(string_columns, "MIN_ENTRIES", 512)
    keys = [f"k{i}" for i in range(511)]
    assert string_columns.encode("t", keys, keys) is None
    assert not string_columns.is_frame(pickle.loads(columns_frame("t", keys, keys)))
    assert string_columns.encode("t", keys + ["x"], keys + ["x"]) is not None


def _round_trip(keys: list, values: list, gone: list = ()) -> tuple:
    data = string_columns.encode("t", keys, values, list(gone))
    assert data is not None
    frame = pickle.loads(data)
    assert string_columns.is_frame(frame)
    return string_columns.decode(frame)


def _typed(items: list) -> list:
    return [(type(x), tuple(map(type, x)) if type(x) is tuple else (), x) for x in items]


class Word(str):
    pass


Pair = namedtuple("Pair", "a b")


@pytest.mark.parametrize(
    "keys, values",
    [
        (["a", "b", "c"], [("a", 1), ("b", 2**40), ("c", -3)]),  # a reduce's (key, count): the key not stored twice
        (["a", "b"], [("b", 1), ("a", 2)]),  # a first field that is not the key
        (["a", "b"], ["x", ""]),
        (["a", "b"], [1.5, -0.0]),
        (["é", "日本", "\U0001f600", "\ud800"], [(1, "x", 2.5), (2, "", 0.0), (3, "\udfff", 1e308), (4, "z", -1.0)]),
        ([1, 2, 3], ["a", "b", "c"]),  # int keys, string values
        ([5, 6], [(5, "a"), (6, "b")]),
        (["", "a"], [("", 0), ("a", 0)]),  # the empty string as a key
        ([""], [""]),
        (["k"], [("k",)]),
    ],
)
def test_strings_and_numbers_read_back_as_the_very_values_and_types_written(keys, values) -> None:
    name, got_keys, got_values, gone = _round_trip(keys, values, ["gone", ""] if type(keys[0]) is str else [9])
    assert name == "t"
    assert _typed(got_keys) == _typed(keys)
    assert _typed(got_values) == _typed(values)
    assert gone == (["gone", ""] if type(keys[0]) is str else [9])


def test_a_field_repeating_the_key_is_read_back_as_the_key_object_itself() -> None:
    _, keys, values, _ = _round_trip(["a", "b"], [("a", 1), ("b", 2)])
    assert all(v[0] is k for k, v in zip(keys, values))


def test_deletions_only_and_empty_frames() -> None:
    assert _round_trip([], [], ["a", "b"]) == ("t", [], [], ["a", "b"])
    assert _round_trip(["a"], ["b"], []) == ("t", ["a"], ["b"], [])


@pytest.mark.parametrize(
    "keys, values",
    [
        (["a", "b"], [Word("x"), "y"]),  # a str subclass
        ([Word("a"), "b"], ["x", "y"]),
        (["a", "b"], [("a", 1), Pair("b", 2)]),  # a tuple subclass
        (["a", "b"], [("a", True), ("b", 1)]),  # a bool is not an int
        (["a", "b"], [("a", 1), ("b", 1.5)]),  # an int and a float in one field
        (["a", "b"], [("a", 2**64), ("b", 1)]),  # out of int64
        (["a\0b", "c"], [1, 2]),  # the separator in a key
        (["a", "b"], ["x\0", "y"]),
        (["a", "b"], [("a", 1), ("b", 1, 2)]),  # tuples of two lengths
        (["a", "b"], [(), ()]),
        (["a", "b"], [["a"], ["b"]]),  # lists
        (["a", "b"], [None, None]),
        (["a", 1], [1, 2]),  # keys of two types
        ([1.5, 2.5], ["a", "b"]),  # float keys
        ([True, False], ["a", "b"]),
        ([(1, "a")], ["x"]),  # tuple keys
        (["a", "b"], [Row("a", 1), Row("b", 2)]),
    ],
)
def test_other_types_are_refused_and_pickled(keys, values) -> None:
    assert string_columns.encode("t", keys, values) is None
    (name, got, gone), = frames(columns_frame("t", keys, values))
    assert (name, list(got), list(got.values()), gone) == ("t", keys, values, [])
    assert _typed(list(got.values())) == _typed(values)


def test_the_key_field_is_not_taken_for_an_equal_value_of_another_type() -> None:
    # 1 == True and "a" == Word("a"): the field is stored as itself (or refused), never as the key
    assert string_columns.encode("t", [1, 2], [(True, "a"), (False, "b")]) is None
    _, _, values, _ = _round_trip([1, 2], [(1.0, "a"), (2.0, "b")])
    assert _typed(values) == _typed([(1.0, "a"), (2.0, "b")])


def test_the_writer_frame_of_string_state_is_text_columns_and_reads_back_through_frames() -> None:
    keys = [f"user-{i}" for i in range(1000)]
    values = [(k, i) for i, k in enumerate(keys)]
    data = columns_frame("_reduce", keys, values)
    assert string_columns.is_frame(pickle.loads(data))
    assert len(data) < 0.6 * len(pickle.dumps(("_reduce", keys, values, []), pickle.HIGHEST_PROTOCOL))
    (name, got, gone), = frames(data)
    assert name == "_reduce" and got == dict(zip(keys, values)) and gone == []
    # a deleted key (ABSENT) goes to the deletions
    (name, got, gone), = frames(columns_frame("_reduce", ["a", "b"], [("a", 1), ABSENT]))
    assert got == {"a": ("a", 1)} and gone == ["b"]


_text = st.text(alphabet=st.characters(blacklist_characters="\0"), max_size=6)
_field = st.one_of(st.just("k"), st.sampled_from(["s", "q", "d"]))


@pytest.mark.parametrize("collide", [False, True])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(_text, max_size=30, unique=True),
    st.lists(_field, min_size=0, max_size=3),
    st.booleans(),
    st.data(),
)
def test_frames_replay_like_a_dict_whatever_the_entries(monkeypatch, collide, keys, shape, base, data) -> None:
    """A slot holding text-column frames as arrays (merged in numpy) gives what a dict replay of the
    same entries gives, values, types and deletions; and so it does where every key hashes alike
    (``collide``: it falls back to the dict)."""
    if collide:
        monkeypatch.setattr(string_arrays, "hashes", lambda s: np.zeros(len(s), dtype=np.uint64))
    draw = {"s": _text, "q": st.integers(-(2**63), 2**63 - 1), "d": st.floats(allow_nan=False)}

    def value(k: str) -> object:
        if not shape:
            return data.draw(_text)
        return tuple(k if f == "k" else data.draw(draw[f]) for f in shape)

    batches = []
    for _ in range(data.draw(st.integers(1, 3))):
        ks = data.draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
        gone = data.draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
        gone = [k for k in gone if k not in ks]
        batches.append((ks, [value(k) for k in ks], gone))
    expected: dict = {}
    deleted: set = set()
    slot, again = _Slot(base), _Slot(base)
    for ks, vs, gone in batches:
        for frame in _raw_frames(columns_frame("t", ks + gone, vs + [ABSENT] * len(gone)), text=True):
            slot.add(frame)
            again.add(frame)
        expected.update(zip(ks, vs))
        deleted.difference_update(ks)
        for k in gone:
            expected.pop(k, None)
        deleted.update(gone)
    table, gone = slot.as_table()
    assert table == expected
    assert _typed([table[k] for k in expected]) == _typed(list(expected.values()))
    assert gone == (set() if base else deleted)
    # what compaction writes (``_replayed_parts``) reads back the same
    merged = again.columns()
    if merged is not None:
        replay = _Slot(base)
        for data_ in string_columns.encode_chunks(merged, 7):
            for frame in _raw_frames(data_):
                replay.add(frame)
        assert replay.as_table() == (expected, set() if base else deleted)


def test_the_writers_batches_sorted_by_key_group_keep_each_key_groups_order() -> None:
    from millstream.engine.runtime.key_group_batch import key_grouper

    grouper = key_grouper(128, "STRING")
    batches = [[f"user-{i}" for i in range(lo, lo + 300)] for lo in (0, 300)]
    batches.append(["user-5", "ünï-1"])  # user-5 again, later; a key that is not ASCII
    slices = []
    for keys in batches:
        frame = string_columns.batch("t", keys, [(k, i) for i, k in enumerate(keys)])
        assert frame is not None and string_columns.decode(frame) == ("t", keys, [(k, i) for i, k in enumerate(keys)], [])
        text, ascii_keys = string_columns.held(frame), string_columns.ascii_keys(frame)
        assert ascii_keys == all(k.isascii() for k in keys)
        kgs = grouper.of_text(text.keys.data, text.keys.starts, text.keys.lengths, ascii_keys)
        kgs = grouper(keys) if kgs is None else kgs
        slices.append((kgs, text))
    seen: dict = {}
    for kg, data_ in string_columns.by_key_group(slices):
        (name, keys, values, gone), = _raw_frames(data_)
        assert name == "t" and not gone and set(grouper(keys).tolist()) == {kg}
        for k, v in zip(keys, values):
            seen.setdefault(k, []).append(v)
    assert seen["user-5"] == [("user-5", 5), ("user-5", 0)]  # in the order logged
    assert seen["ünï-1"] == [("ünï-1", 1)] and len(seen) == 601
    assert string_columns.batch("t", [1, 2], [("a", 1), ("b", 2)]) is None  # int keys: not this path
