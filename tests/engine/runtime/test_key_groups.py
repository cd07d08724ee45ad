"""Key groups: Flink's KeyGroupRangeAssignment formulas over PyFlink's key hash (see test_key_hash)."""
from __future__ import annotations

import pytest

from millstream.engine.runtime.key_groups import (
    assign_key_to_operator,
    assign_to_key_group,
    key_group_range,
    operator_index_for_key_group,
)

PAIRS = [(1, 1), (7, 7), (10, 3), (128, 1), (128, 3), (128, 5), (128, 128), (4096, 13), (32768, 7)]


def _flink_operator_index(max_p: int, p: int, kg: int) -> int:
    # KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup
    return kg * p // max_p


def _flink_range(max_p: int, p: int, op: int) -> tuple[int, int]:
    # KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex (inclusive bounds)
    start = (op * max_p + p - 1) // p
    end = ((op + 1) * max_p - 1) // p
    return start, end


@pytest.mark.parametrize(("max_p", "p"), PAIRS)
def test_operator_index_matches_flink(max_p, p):
    for kg in range(max_p):
        assert operator_index_for_key_group(max_p, p, kg) == _flink_operator_index(max_p, p, kg)


@pytest.mark.parametrize(("max_p", "p"), PAIRS)
def test_key_group_range_matches_flink_and_is_the_exact_inverse(max_p, p):
    owners = [operator_index_for_key_group(max_p, p, kg) for kg in range(max_p)]
    covered: list[int] = []
    for op in range(p):
        r = key_group_range(max_p, p, op)
        assert (r.start, r.stop - 1) == _flink_range(max_p, p, op)
        assert r.step == 1  # contiguous
        assert list(r) == [kg for kg in range(max_p) if owners[kg] == op]
        covered.extend(r)
    # Every key group belongs to exactly one operator, in ascending order of operator.
    assert covered == list(range(max_p))


@pytest.mark.parametrize(("max_p", "p"), [(128, 3), (128, 5), (4096, 13)])
def test_ranges_are_balanced(max_p, p):
    sizes = [len(key_group_range(max_p, p, op)) for op in range(p)]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("key", ["user-1", "", "ü", 42, -7, 0, 2**200, ("a", 1), True, None, 1.5, b"raw"])
def test_key_group_is_deterministic_and_in_range(key):
    for max_p in (1, 7, 128, 32768):
        kg = assign_to_key_group(key, max_p)
        assert kg == assign_to_key_group(key, max_p)
        assert 0 <= kg < max_p


# Hard-coded so that any change of the key hash (which would orphan all keyed state in existing
# checkpoints, and send keys to other subtasks than PyFlink does) fails here. Key encoding 3:
# murmurHash(62 + Arrays.hashCode(cloudpickle.dumps(key))) % max parallelism, as PyFlink 2.3.0
# routes an untyped key (tests/conformance/programs/keyed_routing_key_types.py records where).
@pytest.mark.parametrize(
    ("key", "kg128", "kg32768"),
    [
        ("user-1", 23, 21015),
        (42, 64, 11584),
        (-7, 87, 12759),
        (("a", 1), 9, 29449),
        # True is the key 1 (Python calls them equal; PyFlink pickles them apart).
        (True, 38, 12326),
        (1, 38, 12326),
        (None, 90, 1882),
    ],
)
def test_key_group_values_are_pinned(key, kg128, kg32768):
    assert assign_to_key_group(key, 128) == kg128
    assert assign_to_key_group(key, 32768) == kg32768


def test_keys_python_calls_equal_share_their_key_group():
    # True == 1 == 1.0: one key to Python and to the heap backend, so one key group.
    for spec in (None, "INT", "LONG", "DOUBLE", "BOOLEAN"):
        assert assign_to_key_group(True, 128, spec) == assign_to_key_group(1, 128, spec) == assign_to_key_group(1.0, 128, spec)
    assert assign_to_key_group(False, 128) == assign_to_key_group(0, 128) == assign_to_key_group(-0.0, 128)


def test_tuple_and_list_keys_hash_alike():
    assert assign_to_key_group(("a", 1), 128) == assign_to_key_group(["a", 1], 128)


@pytest.mark.parametrize(("max_p", "p"), [(128, 1), (128, 4), (10, 3)])
def test_assign_key_to_operator_composes_the_two_steps(max_p, p):
    for key in [f"k{i}" for i in range(200)] + list(range(200)):
        expected = _flink_operator_index(max_p, p, assign_to_key_group(key, max_p))
        assert assign_key_to_operator(key, max_p, p) == expected


def test_keys_spread_over_all_key_groups():
    groups = {assign_to_key_group(f"user-{i}", 128) for i in range(5000)}
    assert len(groups) == 128
