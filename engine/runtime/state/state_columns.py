"""Typed columns for the heap backend's state files: numbers as numpy arrays, not pickled objects.

Most keyed state in stream jobs is numbers keyed by numbers: counts, sums, ``(key, count)`` tuples
of a ``reduce``. Pickled, each entry is a few Python objects that a reader must build again, and
rolled compaction (``heap_state_files.rebase``) reads a key group's base and every delta after it to
write it once more: at 3 M keys with most of them changing per interval, unpickling was most of the
checkpoint cost (issue 16, change 18). Here such a frame is stored as columns of fixed-width numbers,
and a rebase of files in this form is a few numpy calls per key group (``merge``): no Python object
per entry is built, and the newest value of each key is picked by a sort.

A frame is a pickle of ``(MARKER, state name, keys, value spec, (column, ...), deleted keys)``, each
array as ``(numpy type, bytes)``. Keys are ints in int64; values are all ``int`` in int64 (spec
``"q"``), all ``float`` (``"d"``), or all tuples of one length whose fields are each all ``int`` or all
``float`` (a tuple of those codes); spec None: the frame deletes keys only. Exactly those types, so a
value reads back as what was written: a ``bool``, an int beyond int64, an ``IntEnum``, a named tuple
or a ``Row`` makes the frame a plain pickle (``columns`` returns None). An integer array is stored in
the narrowest width that holds its values (``_narrow``): counts take a byte, most keys four.

Without numpy (a bare Python on a Spark executor, which never writes or reads a checkpoint) nothing
is encoded this way.
"""
from __future__ import annotations

import operator
import pickle
from typing import Any, Sequence

try:
    import numpy as np
except ImportError:  # see the module docstring
    np = None

MARKER = "millstream.columns/1"
_DTYPES = {"q": "<i8", "d": "<f8"}
_TYPES = {int: "q", float: "d"}
_MAX_ARITY = 16
_INT_WIDTHS = (("<i1", 1 << 7), ("<i2", 1 << 15), ("<i4", 1 << 31))
_EMPTY = np.empty(0, dtype=np.int64) if np is not None else None

Spec = Any  # None | "q" | "d" | tuple of "q"/"d"


class Columns:
    """A frame's entries as arrays: ``keys`` (int64), ``cols`` (one array per value field, a single one
    for a number), and ``gone`` (int64: keys deleted)."""

    __slots__ = ("name", "keys", "spec", "cols", "gone")

    def __init__(self, name: str, keys: Any, spec: Spec, cols: tuple[Any, ...], gone: Any) -> None:
        self.name = name
        self.keys = keys
        self.spec = spec
        self.cols = cols
        self.gone = gone

    def __len__(self) -> int:
        return len(self.keys) + len(self.gone)

    def values(self) -> list[Any]:
        """The values as Python objects, in the keys' order."""
        if self.spec is None:
            return []
        if isinstance(self.spec, tuple):
            return list(zip(*(c.tolist() for c in self.cols)))
        return self.cols[0].tolist()

    def as_dict(self) -> tuple[str, dict[Any, Any], list[Any]]:
        """``(name, {key: value}, [deleted key])``: how ``heap_state_files.frames`` yields a frame."""
        return self.name, dict(zip(self.keys.tolist(), self.values())), self.gone.tolist()


def int_array(items: Sequence[Any]) -> Any:
    """``items`` as int64 if each is exactly an ``int`` in range, else None (always None without numpy)."""
    if np is None:
        return None
    if not items:
        return np.empty(0, dtype=np.int64)
    if type(items[0]) is not int:  # string keys, say: no pass over them all
        return None
    if set(map(type, items)) != {int}:
        return None
    try:
        return np.fromiter(items, dtype=np.int64, count=len(items))
    except OverflowError:
        return None


def _column(items: Sequence[Any]) -> tuple[str, Any] | None:
    types = set(map(type, items))
    if len(types) != 1:
        return None
    code = _TYPES.get(types.pop())
    if code is None:
        return None
    try:
        return code, np.fromiter(items, dtype=_DTYPES[code], count=len(items))
    except OverflowError:
        return None


def columns(name: str, keys: Sequence[Any], values: Sequence[Any], gone: Sequence[Any] = (), key_array: Any = None) -> Columns | None:
    """The entries as columns, or None where some key or value is not of the types above.
    ``key_array``: the keys as ``int_array`` made them already."""
    if np is None:
        return None
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys and {len(values)} values")
    k = int_array(keys) if key_array is None else key_array
    g = int_array(gone)
    if k is None or g is None:
        return None
    if not values:
        return Columns(name, k, None, (), g)
    shape = value_fields(values)
    if shape is None:
        return None
    is_tuple, fields = shape
    codes, cols = [], []
    for field in fields:
        got = _column(field)
        if got is None:
            return None
        codes.append(got[0])
        cols.append(got[1])
    return Columns(name, k, tuple(codes) if is_tuple else codes[0], tuple(cols), g)


def value_fields(values: Sequence[Any]) -> tuple[bool, list[list[Any]]] | None:
    """The columns a frame's (non-empty) ``values`` would be stored as: (False, [the values]) where
    they are all of one type other than ``tuple``, (True, [each field's values]) where they are all
    tuples of one length (1 to 16), else None. The types within a column are the caller's to check."""
    kinds = set(map(type, values))
    if len(kinds) != 1:
        return None
    if kinds.pop() is not tuple:
        return False, [list(values)]
    arity = set(map(len, values))
    n = arity.pop()
    if arity or not 0 < n <= _MAX_ARITY:
        return None
    return True, [list(map(operator.itemgetter(i), values)) for i in range(n)]


def _narrowest(a: Any) -> str | None:
    """The narrowest little-endian integer type that holds ``a``'s values exactly, or None (not ints,
    or none narrower than int64)."""
    if a.dtype.kind == "i" and len(a):
        lo, hi = int(a.min()), int(a.max())
        for dtype, bound in _INT_WIDTHS:
            if -bound <= lo and hi < bound:
                return dtype
    return None


def _narrowed(a: Any) -> Any:
    dtype = _narrowest(a)
    return a if dtype is None else a.astype(dtype, copy=False)


def _narrow(a: Any) -> tuple[str, bytes]:
    """An array's bytes in the narrowest little-endian type that holds its values exactly: counts and
    ids are mostly small, and int64 would write more than their pickles (1-5 bytes an int)."""
    dtype = _narrowest(a)
    if dtype is not None:
        return dtype, a.astype(dtype, copy=False).tobytes()
    return a.dtype.str, a.tobytes()



def encode(c: Columns) -> bytes:
    payload = (MARKER, c.name, _narrow(c.keys), c.spec, tuple(map(_narrow, c.cols)), _narrow(c.gone))
    return pickle.dumps(payload, pickle.HIGHEST_PROTOCOL)


def is_columns(frame: tuple[Any, ...]) -> bool:
    return len(frame) == 6 and frame[0] == MARKER


def decode(frame: tuple[Any, ...]) -> Columns:
    """The ``Columns`` of an unpickled frame (``is_columns``); the arrays are views of its bytes."""
    _, name, (kt, kb), spec, cbs, (gt, gb) = frame
    cols = tuple(np.frombuffer(b, dtype=t) for t, b in cbs)
    return Columns(name, np.frombuffer(kb, dtype=kt), spec, cols, np.frombuffer(gb, dtype=gt))


def merge(frames: Sequence[Columns], base: bool) -> Columns:
    """One frame equal to ``frames`` (one table's, one key group's, all values of one spec) replayed in order:
    each key's newest entry wins, a value or a deletion. ``base``: the result starts a chain, so its
    deletions are dropped; else they are kept (the key may have a value in an earlier file). The keys
    come out sorted."""
    name = frames[0].name
    spec = next((f.spec for f in frames if f.spec is not None), None)
    width = 0 if spec is None else len(spec) if isinstance(spec, tuple) else 1
    keys = np.concatenate([a for f in frames for a in (f.keys, f.gone)])
    deleted = np.concatenate([np.repeat(np.array([False, True]), [len(f.keys), len(f.gone)]) for f in frames])
    # an entry's row in the concatenated value columns (meaningful for values only)
    row = np.cumsum(~deleted) - 1
    # the newest entry of each key: the first of it in the reversed order
    uniq, first = np.unique(keys[::-1], return_index=True)
    newest = len(keys) - 1 - first
    alive = ~deleted[newest]
    cols: tuple[Any, ...] = ()
    if width:
        rows = row[newest[alive]]
        cols = tuple(np.concatenate([f.cols[i] for f in frames if f.spec is not None])[rows] for i in range(width))
    gone = np.empty(0, np.int64) if base else uniq[~alive]
    return Columns(name, uniq[alive], spec if width and alive.any() else None, cols if alive.any() else (), gone)


def encode_chunks(c: Columns, size: int) -> list[bytes]:
    """``c`` as frames of at most ``size`` entries: values first, then deletions."""
    out = []
    for lo in range(0, len(c.keys), size):
        out.append(encode(Columns(c.name, c.keys[lo : lo + size], c.spec, tuple(col[lo : lo + size] for col in c.cols), _EMPTY)))
    for lo in range(0, len(c.gone), size):
        out.append(encode(Columns(c.name, _EMPTY, None, (), c.gone[lo : lo + size])))
    return out



def rows(c: Columns, keep: Any) -> Columns:
    """The entries of ``c`` (values only) where the bool array ``keep`` is set."""
    return Columns(c.name, c.keys[keep], c.spec, tuple(col[keep] for col in c.cols), _EMPTY)


def leave_out(kgs: Any, c: Columns, keys: Sequence[Any], done: set[Any]) -> tuple[Any, Columns]:
    """A slice (its keys' key groups, its columns of ``keys``, values only) without the keys in ``done``."""
    keep = ~np.fromiter(map(done.__contains__, keys), dtype=bool, count=len(keys))
    return kgs[keep], rows(c, keep)


def by_key_group(slices: Sequence[tuple[Any, Columns]]) -> list[tuple[int, bytes]]:
    """[(key group, frame)] of a table's slices [(their keys' key groups, columns)], disjoint keys of
    one delta: sorted by key group once (a stable radix sort in numpy), one frame per key group and
    value spec."""
    out: list[tuple[int, bytes]] = []
    by_spec: dict[Spec, list[tuple[Any, Columns]]] = {}
    for kgs, c in slices:
        if len(c.keys):  # a slice whose keys the task saved, all of them
            by_spec.setdefault(c.spec, []).append((kgs, c))
    for spec, group in by_spec.items():
        kgs = np.concatenate([np.asarray(k) for k, _ in group])
        kgs = kgs.astype(np.uint16 if int(kgs.max()) < 1 << 16 else np.int64)  # uint16: a radix sort
        order = np.argsort(kgs, kind="stable")
        kgs = kgs[order]
        # narrowed before the gather by ``order`` (random: a key group is a hash), which then moves a
        # half to an eighth of the bytes; each key group's frame narrows its own slice again
        keys = _narrowed(np.concatenate([c.keys for _, c in group]))[order]
        cols = tuple(_narrowed(np.concatenate([c.cols[i] for _, c in group]))[order] for i in range(len(group[0][1].cols)))
        cuts = np.flatnonzero(kgs[1:] != kgs[:-1]) + 1
        starts = [0, *cuts.tolist()]
        ends = [*cuts.tolist(), len(kgs)]
        name = group[0][1].name
        for lo, hi in zip(starts, ends):
            if hi > lo:
                piece = Columns(name, keys[lo:hi], spec, tuple(c[lo:hi] for c in cols), _EMPTY)
                out.append((int(kgs[lo]), encode(piece)))
    out.sort(key=operator.itemgetter(0))  # stable: a key group's frames of different specs stay in order
    return out
