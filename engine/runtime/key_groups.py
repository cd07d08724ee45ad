"""Key groups: keys hash into ``max_parallelism`` groups; each subtask owns a contiguous range.

Rescaling moves whole key groups, so state can be redistributed without rehashing individual
keys. A key's group is Flink's ``KeyGroupRangeAssignment.assignToKeyGroup``: ``murmurHash`` of the
hash code PyFlink's Java side computes for it (``key_hash``, which depends on the declared key
type), modulo the max parallelism; so ``key_by`` sends a key to the subtask PyFlink sends it to.
The hash is stable across processes and equal for keys Python calls equal (see ``key_encoding``).
"""
from __future__ import annotations

from typing import Any

from millstream.engine.runtime.key_encoding import KEY_ENCODING_VERSION, KeyEncodingError
from millstream.engine.common.key_spec import KeySpec, key_spec
from millstream.engine.runtime.key_hash import key_group_hash

__all__ = [
    "KEY_ENCODING_VERSION",
    "KeyEncodingError",
    "KeySpec",
    "assign_key_to_operator",
    "assign_to_key_group",
    "key_group_range",
    "key_spec",
    "operator_index_for_key_group",
]


def assign_to_key_group(key: Any, max_parallelism: int, spec: KeySpec = None) -> int:
    """Flink's KeyGroupRangeAssignment.assignToKeyGroup for a key of the declared key type ``spec``."""
    return key_group_hash(key, spec) % max_parallelism


def operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """Flink's KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup."""
    return key_group * parallelism // max_parallelism


def key_group_range(max_parallelism: int, parallelism: int, operator_index: int) -> range:
    """The key groups owned by one subtask (inverse of the mapping above)."""
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return range(start, end + 1)


def assign_key_to_operator(key: Any, max_parallelism: int, parallelism: int, spec: KeySpec = None) -> int:
    return operator_index_for_key_group(max_parallelism, parallelism, assign_to_key_group(key, max_parallelism, spec))
