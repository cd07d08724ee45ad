"""Which state values can never change in place: the rule both keyed backends share.

A value that cannot change in place needs no copy before the heap backend hands it out while a
snapshot is in flight (``heap_incremental.CopyOnWrite``), and no write-back from the on-disk
backend's cache unless it was replaced (``lmdb_backend``). Scalars are such values, and tuples and
frozensets of them, nested or not; a list, a dict or any other object is not, whatever it holds.
"""
from __future__ import annotations

import itertools
from typing import Any, Iterable, Sequence

SCALARS = frozenset({int, float, str, bytes, bool, complex, type(None)})
_SCALARS_OR_TUPLE = SCALARS | {tuple}


def immutable(value: Any) -> bool:
    t = type(value)
    if t in SCALARS:
        return True
    if t is tuple or t is frozenset:
        # every element a scalar (a reduce's (key, count)) in C loops, without a generator: about a
        # third less per value than the recursion alone, which nested values still take
        return all(map(SCALARS.__contains__, map(type, value))) or all(map(immutable, value))
    return False


def flat_immutable(values: Sequence[Any], also: Iterable[type] = ()) -> bool:
    """Whether every one of ``values`` is a scalar or a tuple of scalars (a reduce's ``(key, count)``),
    or of a type in ``also``: for a whole batch, as two C loops of type checks instead of a call per
    value. False does not mean that some value is mutable (a nested tuple is not, and is refused)."""
    types = set(map(type, values))
    rest = types.difference(also)
    if rest <= SCALARS:
        return True
    if not rest <= _SCALARS_OR_TUPLE:
        return False
    tuples = values if types == {tuple} else [v for v in values if type(v) is tuple]
    return set(map(type, itertools.chain.from_iterable(tuples))) <= SCALARS
