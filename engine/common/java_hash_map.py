"""java.util.HashMap's iteration order, which decides how Flink prints a map.

A HashMap iterates by bucket (the key's hashCode spread and masked by the table size), then
in insertion order within a bucket. PyFlink maps pass through two of them: the pickle reader
(Pyrolite) fills a default-sized map with a dict's items in reverse, and Flink's MapSerializer
rebuilds it as ``new HashMap<>(size)``. Keys hash as the Java objects they become
(String.hashCode, Integer/Long.hashCode, Boolean.hashCode).
"""
from __future__ import annotations

from typing import Any

DEFAULT_CAPACITY = 16
LOAD_FACTOR = 0.75


def java_hash_code(value: Any) -> int:
    """hashCode() of the Java object for a str, int or bool key (as a signed 32-bit int)."""
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return value
        v = value & 0xFFFFFFFFFFFFFFFF  # Long.hashCode: high word xor low word
        return _int32((v ^ (v >> 32)) & 0xFFFFFFFF)
    if isinstance(value, str):
        h = 0
        data = value.encode("utf-16-be")  # Java strings are UTF-16 code units
        for i in range(0, len(data), 2):
            h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
        return _int32(h)
    return hash(value) & 0x7FFFFFFF  # no Java counterpart: any stable spread will do


def _int32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def _capacity(initial: int, n: int) -> int:
    capacity = 1
    while capacity < initial:  # tableSizeFor
        capacity <<= 1
    while n > capacity * LOAD_FACTOR:  # resized while filling
        capacity <<= 1
    return capacity


def _iterate(items: list[tuple[Any, Any]], capacity: int) -> list[tuple[Any, Any]]:
    def bucket(kv: tuple[Any, Any]) -> int:
        h = java_hash_code(kv[0]) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(items, key=bucket)  # stable: insertion order within a bucket


def java_hash_map_order(items: list[tuple[Any, Any]], key_type: Any = None) -> list[tuple[Any, Any]]:
    """The entries in the order ``new HashMap<>(size)`` filled in this order iterates them."""
    if not items:
        return items
    return _iterate(items, _capacity(len(items), len(items)))


def pickled_dict_order(items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """The order a Python dict's items reach Flink after Pyrolite read them (from_collection):
    put in reverse into a default-sized HashMap, then iterated."""
    return _iterate(list(reversed(items)), _capacity(DEFAULT_CAPACITY, len(items)))
