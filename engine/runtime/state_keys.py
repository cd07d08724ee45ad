"""Keys as keyed state holds them.

PyFlink keys a record by the pickle of whatever its key selector returns, so a list (or a set, a
bytearray, a tuple holding a list) is a key like any other. Python dictionaries cannot hold those,
so state, timers and windows hold each such key as an equal hashable stand-in (a list as the tuple
``key_by`` already routes it as, a set as a frozenset, a bytearray as bytes), while user functions
still see the key the selector returned (``ctx.get_current_key()``, a window function's ``key``).
"""
from __future__ import annotations

from typing import Any


def hashable_key(k: Any) -> Any:
    """An equal hashable stand-in for a key Python cannot hash (at any depth); other keys unchanged."""
    if isinstance(k, list):
        return tuple(hashable_key(x) for x in k)
    if isinstance(k, tuple) and type(k) is tuple:
        return tuple(hashable_key(x) for x in k)
    if isinstance(k, (set, frozenset)):
        return frozenset(hashable_key(x) for x in k)
    if isinstance(k, bytearray):
        return bytes(k)
    return k


class StateKeys:
    """One operator's stand-ins, remembering the key each stood in for (a key that needs none costs
    one ``hash``, which Python caches for strings)."""

    def __init__(self) -> None:
        self.originals: dict[Any, Any] = {}

    def of(self, k: Any) -> Any:
        """The key state is held under: ``k`` itself when hashable."""
        try:
            hash(k)
            return k
        except TypeError:
            pass
        held = hashable_key(k)
        self.originals[held] = k
        return held

    def user_key(self, held: Any) -> Any:
        """The key as the selector returned it (for a timer or window of a stand-in key, the last
        selector result equal to it)."""
        return self.originals.get(held, held) if self.originals else held
