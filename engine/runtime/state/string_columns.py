"""Text columns for the heap backend's state files: string keys and values as joined text, not pickles.

A job keyed by strings (user ids, words) keeps state like ``(word, count)``: pickled, each entry is
a key, a tuple, the tuple's string and its number, each an object a reader builds again and each
memoised by the writer. Rolled compaction (``heap_state_files.rebase``) reads a key group's base and
its deltas and writes it once more, so at 3 M string keys with a third of them changing per interval
the pickles were most of the checkpoint cost (issue 16, change 26). Here such a frame is stored as
columns: the strings of a column joined by NUL into one UTF-8 text, numbers as ``state_columns``
stores them, and a tuple field that repeats its entry's key (a reduce's ``(key, count)``) as the
key column itself. Writing one is a join and an encode per column; reading one a decode and a
split, and the values are rebuilt around the key objects (``zip``), so a restored value's key is
the table key's own object.

A frame is a pickle of ``(MARKER, state name, entries, keys, value spec, (column, ...), deleted
keys)``; keys and deleted keys are a column each. A column is ``("s", count, bytes)`` for strings or
``(numpy type, bytes)`` for numbers. The value spec is ``"s"`` (every value a ``str``), ``"q"`` or
``"d"`` (every value an ``int`` in int64 or a ``float``), or a tuple of those and ``"k"`` (a field
equal to the key) for tuples of one length. Exactly those types, so what is read back is what was
written: a ``str`` subclass, a string holding NUL, a ``bool`` or a ``Row`` leaves the frame a pickle
(``encode`` returns None), as does a small frame (``MIN_ENTRIES``). Keys are strings or ints;
frames whose keys and values are all numbers are ``state_columns``' and never come here.

Measured offline (a 2-core VM, ``user-<n>`` keys with ``(key, count)`` values): a key group's file
2.2x smaller than its pickles, restores decode it in 190 ns an entry against 240, and a rebase costs
the same CPU (the dict of the replay is most of it).
"""
from __future__ import annotations

import os
import pickle
from typing import Any, Sequence

from millstream.engine.runtime.state import state_columns

try:
    import numpy as np
except ImportError:  # a bare Python on a Spark executor: nothing is encoded this way
    np = None

MARKER = "millstream.text-columns/1"
_SEP = "\0"
# Fewer entries than this stay a pickle: a frame's own cost (a few numpy calls, a set of types per
# column) is tens of microseconds, and a delta writer's frames are a key group's run of a slice,
# tens of keys each (``heap_incremental._lock_batches``), where text columns cost twice the pickle.
# The variable lets a test run a small job on real processes through text columns.
MIN_ENTRIES = int(os.environ.get("MILLSTREAM_TEXT_COLUMNS_MIN_ENTRIES", "512"))


def _text(items: Sequence[Any]) -> tuple[Any, ...] | None:
    """A column of strings as ``("s", count, utf-8 bytes)``, or None if one is not exactly a ``str``
    or holds the separator. Lone surrogates pass through (``surrogatepass``) and read back as they were."""
    if items and set(map(type, items)) != {str}:
        return None
    joined = _SEP.join(items)
    if joined.count(_SEP) != max(0, len(items) - 1):
        return None
    return "s", len(items), joined.encode("utf-8", "surrogatepass")


def _numbers(items: Sequence[Any]) -> tuple[str, tuple[Any, ...]] | None:
    """A column of numbers as (its spec, ``(numpy type, bytes)``), or None."""
    got = state_columns._column(items)
    if got is None:
        return None
    return got[0], state_columns._narrow(got[1])


def _column(items: Sequence[Any]) -> tuple[str, tuple[Any, ...]] | None:
    """(spec, column) for a column of strings or of numbers."""
    if items and type(items[0]) is str:
        text = _text(items)
        return None if text is None else ("s", text)
    return _numbers(items)


def _keys(items: Sequence[Any]) -> tuple[Any, ...] | None:
    if not items:
        return "s", 0, b""
    if type(items[0]) is str:
        return _text(items)
    got = _numbers(items)
    return got[1] if got is not None and got[0] == "q" else None


def encode(name: str, keys: Sequence[Any], values: Sequence[Any], gone: Sequence[Any] = ()) -> bytes | None:
    """The frame of these entries (``values[i]`` is ``keys[i]``'s; ``gone`` deleted), or None where a
    key or a value is of a type this does not store exactly."""
    if np is None or len(keys) + len(gone) < MIN_ENTRIES:
        return None
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys and {len(values)} values")
    k = _keys(keys)
    g = _keys(gone)
    if k is None or g is None:
        return None
    spec: Any = None
    cols: list[tuple[Any, ...]] = []
    if values:
        shape = state_columns.value_fields(values)
        if shape is None:
            return None
        is_tuple, fields = shape
        codes = []
        for field in fields:
            # a tuple field that repeats the key (the keys are exactly str or int, checked above): its
            # types checked too, as 1 == True and a str subclass equals a str
            if is_tuple and field == keys and set(map(type, field)) == {type(keys[0])}:
                codes.append("k")
                continue
            got = _column(field)
            if got is None:
                return None
            codes.append(got[0])
            cols.append(got[1])
        spec = tuple(codes) if is_tuple else codes[0]
    return pickle.dumps((MARKER, name, len(keys), k, spec, tuple(cols), g), pickle.HIGHEST_PROTOCOL)


def is_frame(frame: tuple[Any, ...]) -> bool:
    return len(frame) == 7 and frame[0] == MARKER


def _read(column: tuple[Any, ...]) -> list[Any]:
    if column[0] == "s":
        _, count, data = column
        return data.decode("utf-8", "surrogatepass").split(_SEP) if count else []
    dtype, data = column
    return np.frombuffer(data, dtype=dtype).tolist()


def decode(frame: tuple[Any, ...]) -> tuple[str, list[Any], list[Any], list[Any]]:
    """An unpickled frame (``is_frame``) as ``(state name, [key], [value], [deleted key])``, the shape
    of the delta writer's pickled frames."""
    _, name, count, k, spec, cols, g = frame
    keys = _read(k)
    if len(keys) != count:
        raise ValueError(f"a text-columns frame of {count} entries holds {len(keys)} keys")
    if spec is None:
        values: list[Any] = []
    elif isinstance(spec, tuple):
        read = iter(cols)
        fields = [keys if code == "k" else _read(next(read)) for code in spec]
        values = list(zip(*fields))
    else:
        values = _read(cols[0])
    return name, keys, values, _read(g)
