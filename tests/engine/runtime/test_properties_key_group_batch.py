"""Property tests for the batch key-group hash: for any mix of keys and any key type the scalar
hash supports, ``key_group_hashes`` returns exactly what ``key_group_hash`` returns key by key,
whether a key took a numpy fast path or fell back to the scalar function."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from millstream.engine.runtime.key_group_batch import SLICE, assign_to_key_groups, key_group_hashes
from millstream.engine.runtime.key_groups import assign_to_key_group
from millstream.engine.runtime.key_hash import key_group_hash

SPECS: list[Any] = [
    None,
    "LONG",
    "INT",
    "STRING",
    "BOOLEAN",
    "DOUBLE",
    "FLOAT",
    ("TUPLE", ("STRING", "INT")),
    ("ROW", ("LONG", "STRING"), ("a", "b")),
]

ints = st.one_of(
    st.integers(-(2**31) - 2, 2**31 + 2),
    st.integers(-(2**63) - 2, 2**63 + 2),
    st.integers(-(2**80), 2**80),  # past int64 and msgpack's range: the scalar's big-int path
    st.sampled_from([0, -1, 1, 255, 256, 65535, 65536, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 2**64]),
)
texts = st.one_of(
    st.text(max_size=12),  # any code point, astral ones (two UTF-16 units) and lone surrogates included
    st.text(alphabet="abcxyz-_0123456789", max_size=20),
    st.text(alphabet=st.characters(max_codepoint=0xFFFF), max_size=8),
)
others = st.one_of(
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True),
    st.binary(max_size=6),
    st.tuples(texts, ints),
    st.tuples(ints, texts),
)
keys_of = st.lists(st.one_of(ints, texts, others), max_size=60)


@settings(max_examples=150, deadline=None)
@given(keys=keys_of, spec=st.sampled_from(SPECS))
def test_batch_equals_scalar_for_mixed_keys(keys, spec):
    assert key_group_hashes(keys, spec) == [key_group_hash(k, spec) for k in keys]


@settings(max_examples=60, deadline=None)
@given(keys=st.one_of(st.lists(ints, max_size=80), st.lists(texts, max_size=80)), spec=st.sampled_from(SPECS))
def test_batch_equals_scalar_for_one_key_type(keys, spec):
    """One key type per batch: the path without index lists."""
    assert key_group_hashes(keys, spec) == [key_group_hash(k, spec) for k in keys]


@settings(max_examples=30, deadline=None)
@given(keys=keys_of, spec=st.sampled_from(SPECS), max_p=st.sampled_from([1, 7, 128, 32768]))
def test_key_groups_equal_the_scalar_assignment(keys, spec, max_p):
    assert assign_to_key_groups(keys, max_p, spec).tolist() == [assign_to_key_group(k, max_p, spec) for k in keys]


def test_more_keys_than_one_slice():
    """Slices are hashed apart: positions restart in each, the result is one list in key order."""
    keys: list[Any] = list(range(SLICE + 5)) + [f"k{i}" for i in range(300)] + [True, 2.0, None]
    for spec in (None, "LONG", "INT", "STRING"):
        assert key_group_hashes(keys, spec) == [key_group_hash(k, spec) for k in keys]


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, -1, 2**31 - 1, -(2**31), 2**31]), max_size=200),
    spec=st.sampled_from([None, "LONG", "INT", "STRING"]),
    max_parallelism=st.sampled_from([1, 7, 128, 32768]),
)
def test_key_groups_of_an_int_array_are_those_of_the_keys(keys, spec, max_parallelism) -> None:
    """The heap writer hashes int keys it holds as an int64 array (``KeyGrouper.of_ints``): the same
    key groups as the keys themselves get, or None where the key type hashes them another way."""
    import numpy as np

    from millstream.engine.runtime.key_group_batch import key_grouper

    grouper = key_grouper(max_parallelism, spec)
    got = grouper.of_ints(np.array(keys, dtype=np.int64))
    if spec not in ("LONG", "INT") or (spec == "INT" and any(not -(2**31) <= k < 2**31 for k in keys)):
        assert got is None
        return
    assert got is not None
    assert got.tolist() == [assign_to_key_group(k, max_parallelism, spec) for k in keys]
    assert got.tolist() == list(grouper(keys))
