"""Key groups: keys hash into ``max_parallelism`` groups; each subtask owns a contiguous range.

Rescaling moves whole key groups, so state can be redistributed without
rehashing individual keys. The hash must be stable across processes, which
Python's ``hash()`` of a str is not, and equal for keys Python calls equal
(see ``key_encoding``).
"""
from __future__ import annotations

import zlib
from typing import Any

import msgpack

from engine.runtime.key_encoding import EXT_BIGINT, KEY_ENCODING_VERSION, KeyEncodingError, canonical

__all__ = [
    "KEY_ENCODING_VERSION",
    "KeyEncodingError",
    "assign_key_to_operator",
    "assign_to_key_group",
    "key_bytes",
    "key_group_range",
    "operator_index_for_key_group",
]

_NIL = msgpack.packb(None)


def _int_bytes(key: int) -> bytes:
    return key.to_bytes(16, "little", signed=True) if -(2**127) <= key < 2**127 else str(key).encode()


def key_bytes(key: Any) -> bytes:
    """The bytes a key is hashed by. A str, bytes, int or None key, and a tuple of them, keeps
    the bytes of encoding version 1, so their state in older savepoints stays in its key group;
    every other key is its packed canonical form, in which equal keys are equal."""
    t = type(key)
    if t is str:
        return key.encode()
    if t is int:
        return _int_bytes(key)
    if t is bytes:
        return key
    if key is None:
        return _NIL
    if t is tuple:  # of plain values, the usual composite key: msgpack packs it as it is
        for e in key:
            te = type(e)
            if not (te is str or (te is int and -(2**63) <= e < 2**64) or te is bytes or e is None):
                break
        else:
            return msgpack.packb(key, use_bin_type=True)
    c = canonical(key)
    tc = type(c)
    # A key equal to a str, bytes or int (a bool, 1.0, Decimal(1), an IntEnum, a str subclass)
    # hashes as that value does.
    if tc is int:
        return _int_bytes(c)
    if tc is str:
        return c.encode()
    if tc is bytes:
        return c
    if tc is msgpack.ExtType and c.code == EXT_BIGINT:  # a big int folded from a float or Decimal
        return _int_bytes(int(c.data))
    return msgpack.packb(c, use_bin_type=True)


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
