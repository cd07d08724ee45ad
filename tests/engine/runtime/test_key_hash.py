"""PyFlink's key hash: what Flink's partitioner hashes for a key, per declared key type.

The expected numbers were read from PyFlink 2.3.0's JVM (``Row.hashCode`` of the one-field Row
``KeyByKeySelector`` makes, ``MathUtils.murmurHash``); where whole programs land is checked against
recorded PyFlink output by the conformance program keyed_routing_key_types.
"""
from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from millstream.engine.common.key_spec import key_spec
from millstream.engine.common.row import Row
from millstream.engine.common.typeinfo import Types
from millstream.engine.runtime.key_groups import assign_key_to_operator
from millstream.engine.runtime.key_hash import bytes_hash_code, key_hash_code, murmur_hash, string_hash_code

STRING_INT_TUPLE = key_spec(Types.TUPLE([Types.STRING(), Types.INT()]))
STRING_INT_ROW = key_spec(Types.ROW([Types.STRING(), Types.INT()]))


def test_murmur_hash_matches_flink():
    assert murmur_hash(2) == 1085422463  # MathUtils.murmurHash(2) on PyFlink's JVM
    assert all(murmur_hash(c) >= 0 for c in (0, -1, 2**31 - 1, -(2**31), 159, 62))


def test_java_hash_codes():
    assert string_hash_code("a") == 97
    assert string_hash_code("hello") == 99162322  # "hello".hashCode()
    assert string_hash_code("😀") == (31 * 0xD83D + 0xDE00)  # two UTF-16 code units
    assert bytes_hash_code(b"") == 1 and bytes_hash_code(b"\xff") == 31 - 1  # bytes are signed


@pytest.mark.parametrize(
    ("key", "spec", "row_hash"),
    [
        ("a", "STRING", 159),  # Row(1){"a"}.hashCode() on PyFlink's JVM
        (0, "INT", 62),
        (1, "INT", 63),
        (True, "BOOLEAN", 1293),
        (("a", 1), STRING_INT_TUPLE, 3070),  # a Tuple2 key
        (Row("a", 1), STRING_INT_ROW, 5023),  # a Row key (positional or named f0, f1)
        (Row(f0="a", f1=1), STRING_INT_ROW, 5023),
        (Row(f1=1, f0="a"), STRING_INT_ROW, 5023),
        (None, "STRING", 31),  # a null key
    ],
)
def test_typed_keys_hash_as_the_java_row_does(key, spec, row_hash):
    assert key_hash_code(key, spec) == row_hash


def test_untyped_keys_hash_their_pickle():
    for key in ("the", 2**40, 1.5, b"ab", None, ("a", 1), ("x", ("y", 2))):
        assert key_hash_code(key) == 62 + _signed_array_hash(pickle.dumps(key, protocol=5))


def _signed_array_hash(data: bytes) -> int:
    h = 1
    for b in data:
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def test_the_recorded_pyflink_subtasks():
    # print_identifier_parallel / union_print_parallel / word_count at parallelism 2 (PyFlink 2.3.0).
    assert [assign_key_to_operator(k, 128, 2, "STRING") for k in "abcd"] == [1, 1, 0, 1]
    assert [assign_key_to_operator(k, 128, 2, "INT") for k in (0, 1)] == [0, 0]
    words = {"the": 0, "dog": 0, "brown": 0, "jumps": 0, "sleeps": 0, "over": 1, "lazy": 1, "quick": 1, "fox": 1}
    assert {w: assign_key_to_operator(w, 128, 2) for w in words} == words


def test_equal_keys_hash_alike_whatever_the_type():
    assert key_hash_code(2.0) == key_hash_code(2) == key_hash_code(True + 1)
    assert key_hash_code(2, "DOUBLE") == key_hash_code(2.0, "DOUBLE")
    assert key_hash_code(["a", 1]) == key_hash_code(("a", 1))
    # Strings equal but not identical inside a tuple: the pickle's memo must not tell them apart.
    a, b = "".join(["x", "y"]), "".join(["x", "y"])
    assert a is not b and key_hash_code((a, a)) == key_hash_code((a, b))


def test_keys_without_a_java_form_of_their_type_fall_back_to_a_stable_hash():
    assert key_hash_code(1.5, "INT") == key_hash_code(1.5)
    assert key_hash_code("a", "INT") == key_hash_code("a")
    assert key_hash_code(("a", 1, 2), STRING_INT_TUPLE) == key_hash_code(("a", 1, 2))


def test_hash_is_the_same_in_another_process_with_another_hash_seed():
    keys = "[frozenset({'a', 'b', 'c'}), ('x', 1.5), 'straße', 10**30]"
    code = f"from millstream.engine.runtime.key_hash import key_hash_code; print([key_hash_code(k) for k in {keys}])"
    outs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": seed, "PATH": ""}, cwd=".").stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1 and str([key_hash_code(k) for k in eval(keys)]) + "\n" in outs
