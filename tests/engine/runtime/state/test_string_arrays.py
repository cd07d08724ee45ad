"""Strings held as bytes with offsets (string_arrays): gathers, concatenation, and the newest entry of
each string found by a hash whose collisions are caught, never trusted."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from millstream.engine.runtime.key_group_batch import key_grouper
from millstream.engine.runtime.key_hash import key_group_hash
from millstream.engine.runtime.state import string_arrays
from millstream.engine.runtime.state.string_arrays import Strings

_text = st.text(alphabet=st.characters(blacklist_characters="\0"), max_size=8)


def _strings(items: list[str]) -> Strings:
    return Strings.of_joined("\0".join(items).encode("utf-8", "surrogatepass"), len(items))


def _read(s: Strings) -> list[str]:
    return s.joined().decode("utf-8", "surrogatepass").split("\0") if len(s) else []


@settings(max_examples=200, deadline=None)
@given(st.lists(_text, max_size=40), st.lists(_text, max_size=10), st.data())
def test_concat_take_and_slices_read_back_the_strings_they_hold(a, b, data) -> None:
    both = string_arrays.concat([_strings(a), _strings([]), _strings(b)])
    assert _read(both) == a + b
    idx = data.draw(st.lists(st.integers(0, max(0, len(a) + len(b) - 1)), max_size=30)) if a + b else []
    assert _read(string_arrays.take(both, np.array(idx, dtype=np.int64))) == [(a + b)[i] for i in idx]
    lo = data.draw(st.integers(0, len(a) + len(b)))
    assert _read(both.slice(lo, len(a) + len(b))) == (a + b)[lo:]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["", "a", "b", "ab", "ba", "é", "\ud800", "日本", "user-1", "user-10"]), max_size=60))
def test_newest_is_each_strings_last_occurrence(items) -> None:
    s = _strings(items)
    last = {x: i for i, x in enumerate(items)}
    got = string_arrays.newest(s)
    assert got is not None and got.tolist() == sorted(last.values())


def test_equal_strings_hash_equal_wherever_they_lie_and_the_length_counts() -> None:
    s = string_arrays.concat([_strings(["user-1", "x", ""]), _strings(["", "y", "user-1"])])
    h = string_arrays.hashes(s).tolist()
    assert h[0] == h[5] and h[2] == h[3] and len(set(h)) == 4
    zeros = string_arrays.hashes(_strings(["", "\x01", "\x01\x01"]))  # the same bytes sum, other lengths
    assert len(set(zeros.tolist())) == 3


def test_a_collision_is_caught_by_comparing_the_bytes(monkeypatch) -> None:
    monkeypatch.setattr(string_arrays, "hashes", lambda s: np.zeros(len(s), dtype=np.uint64))
    assert string_arrays.newest(_strings(["a", "b"])) is None  # different strings, one hash
    assert string_arrays.newest(_strings(["ab", "ab", "ab"])).tolist() == [2]  # truly equal
    assert string_arrays.newest(_strings(["ab", "ba"])) is None  # same length, same bytes, other order


@settings(max_examples=150, deadline=None)
@given(keys=st.lists(st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=127), max_size=12), min_size=1, max_size=50))
def test_key_groups_of_ascii_string_keys_from_their_bytes_are_the_scalar_hashs(keys) -> None:
    s = _strings(keys)
    got = key_grouper(128, "STRING").of_text(s.data, s.starts, s.lengths, True)
    assert got.tolist() == [key_group_hash(k, "STRING") % 128 for k in keys]
    assert key_grouper(128, "STRING").of_text(s.data, s.starts, s.lengths, False) is None  # UTF-16 units differ
    assert key_grouper(128, "LONG").of_text(s.data, s.starts, s.lengths, True) is None


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.one_of(_text, st.text(alphabet=st.characters(blacklist_characters="\0"), min_size=40, max_size=130)), min_size=1, max_size=40))
def test_key_groups_of_strings_with_no_key_type_are_their_pickles_hashs(keys) -> None:
    """No key type: the hash of each key's pickle (any text, non-ASCII and lone surrogates too),
    computed from its UTF-8 bytes; 252 bytes or more: no batch form."""
    s = _strings(keys)
    got = key_grouper(128, None).of_text(s.data, s.starts, s.lengths, all(k.isascii() for k in keys))
    if int(s.lengths.max()) >= 252:
        assert got is None
    else:
        assert got.tolist() == [key_group_hash(k, None) % 128 for k in keys]


def test_the_pickled_hash_at_the_length_bounds() -> None:
    keys = ["", "a" * 123, "b" * 124, "é" * 62, "c" * 127, "d" * 128, "e" * 251, "\ud800" * 3]
    s = _strings(keys)
    got = key_grouper(4096, None).of_text(s.data, s.starts, s.lengths, False)
    assert got.tolist() == [key_group_hash(k, None) % 4096 for k in keys]
    s = _strings(["f" * 252])
    assert key_grouper(4096, None).of_text(s.data, s.starts, s.lengths, True) is None


def test_hashes_do_not_depend_on_the_slices_they_are_computed_in(monkeypatch) -> None:
    s = string_arrays.concat([_strings([f"user-{i}" for i in range(50)]), _strings(["", "é", "user-3"])])
    whole = string_arrays.hashes(s)
    monkeypatch.setattr(string_arrays, "_HASH_SLICE", 7)
    assert np.array_equal(string_arrays.hashes(s), whole)
    assert string_arrays.newest(s).tolist() == [i for i in range(53) if i != 3]
