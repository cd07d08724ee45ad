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
(``encode`` returns None), as does a small frame written from objects (``MIN_ENTRIES``). Keys are
strings or ints; frames whose keys and values are all numbers are ``state_columns``' and never come here.

Frames of string keys are also worked on as arrays (``TextColumns``, over ``string_arrays``), with no
Python object per entry (issue 16, change 27): a reduce's batch is encoded on the task thread while
its objects are in cache (``batch``) and kept so in the change log; the delta writer sorts a log's
batches by key group into one frame per key group (``by_key_group``); and rolled compaction merges a
key group's frames by each key's newest entry (``merge``) and writes the result as frames again
(``encode_chunks``).

Measured offline (a 2-core VM, ``user-<n>`` keys with ``(key, count)`` values): a key group's file
2.2x smaller than its pickles, restores decode it in 190 ns an entry against 240; a delta of 1.3 M
changed keys 17.3 MB against 43.1 MB pickled, written in about half the writer's time.
"""
from __future__ import annotations

import operator
import os
import pickle
from typing import Any, Sequence

from millstream.engine.runtime.state import state_columns, string_arrays

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


class TextColumns:
    """A text-columns frame of string keys held as arrays (``string_arrays``): what the delta writer
    sorts by key group and rolled compaction merges without a Python object per entry. ``cols``
    holds a column per stored field (``Strings`` for ``"s"``, an array for a number; none for
    ``"k"``); ``gone`` the deleted keys."""

    __slots__ = ("name", "keys", "spec", "cols", "gone")

    def __init__(self, name: str, keys: string_arrays.Strings, spec: Any, cols: tuple[Any, ...], gone: string_arrays.Strings) -> None:
        self.name = name
        self.keys = keys
        self.spec = spec
        self.cols = cols
        self.gone = gone

    def __len__(self) -> int:
        return len(self.keys) + len(self.gone)

    def objects(self) -> tuple[str, list[Any], list[Any], list[Any]]:
        """``(name, [key], [value], [deleted key])`` as Python objects (``decode``'s shape)."""
        return decode(_payload(self))


def _stored(spec: Any) -> list[str]:
    """The codes of the fields a spec stores as columns (``"k"`` is the key column itself)."""
    if spec is None:
        return []
    return [c for c in spec if c != "k"] if isinstance(spec, tuple) else [spec]


def held(frame: tuple[Any, ...]) -> TextColumns | None:
    """An unpickled text-columns frame (``is_frame``) as arrays, or None where its keys are ints."""
    _, name, count, k, spec, cols, g = frame
    if k[0] != "s" or g[0] != "s":
        return None
    keys = string_arrays.Strings.of_joined(k[2], count)
    arrays = tuple(
        string_arrays.Strings.of_joined(col[2], col[1]) if code == "s" else np.frombuffer(col[1], dtype=col[0])
        for code, col in zip(_stored(spec), cols)
    )
    return TextColumns(name, keys, spec, arrays, string_arrays.Strings.of_joined(g[2], g[1]))


def held_batches(frames: Sequence[tuple[Any, ...]]) -> TextColumns:
    """Frames of string keys and values of one spec, no deletions (a change log's batches,
    ``batch``), as one ``TextColumns``: each text column joined once, not parsed frame by frame."""

    def text(columns: list[tuple[Any, ...]]) -> string_arrays.Strings:
        count = sum(c[1] for c in columns)
        return string_arrays.Strings.of_joined(b"\0".join(c[2] for c in columns if c[1]), count)

    first = frames[0]
    cols = tuple(
        text([f[5][i] for f in frames]) if code == "s" else np.concatenate([np.frombuffer(f[5][i][1], dtype=f[5][i][0]) for f in frames])
        for i, code in enumerate(_stored(first[4]))
    )
    return TextColumns(first[1], text([f[3] for f in frames]), first[4], cols, string_arrays.EMPTY)


def _payload(t: TextColumns) -> tuple[Any, ...]:
    def column(code: str, col: Any) -> tuple[Any, ...]:
        return ("s", len(col), col.joined()) if code == "s" else state_columns._narrow(col)

    cols = tuple(column(code, col) for code, col in zip(_stored(t.spec), t.cols))
    return (MARKER, t.name, len(t.keys), ("s", len(t.keys), t.keys.joined()), t.spec, cols, ("s", len(t.gone), t.gone.joined()))


def encode_held(t: TextColumns) -> bytes:
    return pickle.dumps(_payload(t), pickle.HIGHEST_PROTOCOL)


def batch(name: str, keys: list[Any], values: list[Any]) -> tuple[Any, ...] | None:
    """A batch of string keys and their values as an unpickled frame (``is_frame``: what ``held`` and
    ``decode`` read), numbers as arrays not yet narrowed, or None where a key or value is of a type
    text columns do not store exactly. Any size: many batches are sorted by key group at once
    (``by_key_group``), so no frame is written per batch. For a reduce's batch on the task thread,
    while its objects are in cache (``change_log``), and for the delta writer."""
    if np is None or not keys or type(keys[0]) is not str:
        return None
    k = _text(keys)
    if k is None:
        return None
    shape = state_columns.value_fields(values)
    if shape is None:
        return None
    is_tuple, fields = shape
    codes: list[str] = []
    cols: list[Any] = []
    for field in fields:
        if is_tuple and field == keys and set(map(type, field)) == {str}:
            codes.append("k")
            continue
        if type(field[0]) is str:
            text = _text(field)
            if text is None:
                return None
            codes.append("s")
            cols.append(text)
            continue
        got = state_columns._column(field)
        if got is None:
            return None
        codes.append(got[0])
        cols.append((got[1].dtype.str, got[1]))
    spec = tuple(codes) if is_tuple else codes[0]
    return MARKER, name, len(keys), k, spec, tuple(cols), ("s", 0, b"")


def ascii_keys(frame: tuple[Any, ...]) -> bool:
    """Whether every key of a frame of string keys is ASCII: its UTF-8 bytes are then its UTF-16 code
    units, which the key-group hash of ``STRING`` keys reads (``KeyGrouper.of_text``)."""
    return frame[3][2].isascii()


def take(t: TextColumns, idx: Any) -> TextColumns:
    cols = tuple(string_arrays.take(c, idx) if code == "s" else c[idx] for code, c in zip(_stored(t.spec), t.cols))
    return TextColumns(t.name, string_arrays.take(t.keys, idx), t.spec, cols, string_arrays.EMPTY)


def pick(t: TextColumns, idx: Any) -> TextColumns:
    """``take`` with the strings left in their buffers (``string_arrays.pick``): for entries a later
    ``take`` gathers anyway (``by_key_group``)."""
    cols = tuple(string_arrays.pick(c, idx) if code == "s" else c[idx] for code, c in zip(_stored(t.spec), t.cols))
    return TextColumns(t.name, string_arrays.pick(t.keys, idx), t.spec, cols, string_arrays.EMPTY)


def concat(group: Sequence[TextColumns]) -> TextColumns:
    """The values of ``group`` (one table's, one spec, no deletions) one after the other."""
    first = group[0]
    cols = tuple(
        string_arrays.concat([g.cols[i] for g in group]) if code == "s" else np.concatenate([g.cols[i] for g in group])
        for i, code in enumerate(_stored(first.spec))
    )
    return TextColumns(first.name, string_arrays.concat([g.keys for g in group]), first.spec, cols, string_arrays.EMPTY)


def by_key_group(slices: Sequence[tuple[Any, TextColumns]]) -> list[tuple[int, bytes]]:
    """[(key group, frame)] of a table's batches [(their keys' key groups, text columns)] in the order
    logged: sorted by key group once (stably, so a key group's entries keep their order), one frame
    per key group and value spec (``state_columns.by_key_group`` for text)."""
    out: list[tuple[int, bytes]] = []
    by_spec: dict[Any, list[tuple[Any, TextColumns]]] = {}
    for kgs, t in slices:
        if len(t.keys):
            by_spec.setdefault(t.spec, []).append((kgs, t))
    for group in by_spec.values():
        kgs = np.concatenate([np.asarray(k) for k, _ in group])
        kgs = kgs.astype(np.uint16 if int(kgs.max()) < 1 << 16 else np.int64)  # uint16: a radix sort
        order = np.argsort(kgs, kind="stable")
        kgs = kgs[order]
        whole = concat([t for _, t in group])
        cuts = (np.flatnonzero(kgs[1:] != kgs[:-1]) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, len(kgs)]):
            # a gather per key group: its index arrays are a key group's bytes, not the delta's
            out.append((int(kgs[lo]), encode_held(take(whole, order[lo:hi]))))
    out.sort(key=operator.itemgetter(0))  # stable: a key group's frames of different specs stay in order
    return out


def merge(frames: Sequence[TextColumns], base: bool) -> TextColumns | None:
    """One frame equal to ``frames`` (one table's, one key group's, values of one spec) replayed in
    order: each key's newest entry wins, a value or a deletion (``state_columns.merge`` for text).
    ``base``: the result starts a chain and its deletions are dropped. None where two different keys
    hash equal (``string_arrays.newest``): the caller replays the frames as objects."""
    spec = next((f.spec for f in frames if f.spec is not None), None)
    keys = string_arrays.concat([a for f in frames for a in (f.keys, f.gone)])
    deleted = np.concatenate([np.repeat(np.array([False, True]), [len(f.keys), len(f.gone)]) for f in frames])
    row = np.cumsum(~deleted) - 1  # an entry's row in the concatenated value columns (values only)
    newest = string_arrays.newest(keys)
    if newest is None:
        return None
    alive = ~deleted[newest]
    live = newest[alive]
    cols: tuple[Any, ...] = ()
    if spec is not None and len(live):
        valued = [f for f in frames if f.spec is not None]
        rows = row[live]
        cols = tuple(
            string_arrays.take(string_arrays.concat([f.cols[i] for f in valued]), rows)
            if code == "s"
            else np.concatenate([f.cols[i] for f in valued])[rows]
            for i, code in enumerate(_stored(spec))
        )
    gone = string_arrays.EMPTY if base else string_arrays.take(keys, newest[~alive])
    return TextColumns(frames[0].name, string_arrays.take(keys, live), spec if len(live) else None, cols, gone)


def _slice(t: TextColumns, lo: int, hi: int) -> TextColumns:
    """The values ``lo`` to ``hi`` of ``t`` (no deletions)."""
    cols = tuple(c.slice(lo, hi) if code == "s" else c[lo:hi] for code, c in zip(_stored(t.spec), t.cols))
    return TextColumns(t.name, t.keys.slice(lo, hi), t.spec, cols, string_arrays.EMPTY)


def encode_chunks(t: TextColumns, size: int) -> list[bytes]:
    """``t`` as frames of at most ``size`` entries: values first, then deletions."""
    out = []
    for lo in range(0, len(t.keys), size):
        out.append(encode_held(_slice(t, lo, lo + size)))
    for lo in range(0, len(t.gone), size):
        out.append(encode_held(TextColumns(t.name, string_arrays.EMPTY, None, (), t.gone.slice(lo, lo + size))))
    return out
