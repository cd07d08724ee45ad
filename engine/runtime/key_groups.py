"""Key groups: keys hash into ``max_parallelism`` groups; each subtask owns a contiguous range.

Rescaling moves whole key groups, so state can be redistributed without
rehashing individual keys. The hash must be stable across processes, which
Python's ``hash()`` of a str is not.
"""
from __future__ import annotations

import zlib
from typing import Any

import msgpack


def key_bytes(key: Any) -> bytes:
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, bytes):
        return key
    if isinstance(key, bool) or key is None:
        return msgpack.packb(key)
    if isinstance(key, int):
        return key.to_bytes(16, "little", signed=True) if -(2**127) <= key < 2**127 else str(key).encode()
    return msgpack.packb(key, default=str)


def assign_to_key_group(key: Any, max_parallelism: int) -> int:
    return zlib.crc32(key_bytes(key)) % max_parallelism


def operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """Flink's KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup."""
    return key_group * parallelism // max_parallelism


def key_group_range(max_parallelism: int, parallelism: int, operator_index: int) -> range:
    """The key groups owned by one subtask (inverse of the mapping above)."""
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return range(start, end + 1)


def assign_key_to_operator(key: Any, max_parallelism: int, parallelism: int) -> int:
    return operator_index_for_key_group(max_parallelism, parallelism, assign_to_key_group(key, max_parallelism))
