"""A reduce's batch of numbers logged as ``marshal``'s bytes: the task thread's cheapest exact copy.

A heap table's change log (``change_log``) keeps each batch a reduce wrote, copied while its objects
are in cache. Copied into numpy columns on the task thread (``state_columns.columns``), a batch of
``(key, count)`` records took ten C passes over it (type checks, field gathers, ``np.fromiter``):
about 400 ns a record on a 2-core VM, 13 % of a slot's CPU at 3 M keys (issue 16, change 24).
``marshal.dumps`` copies a list of ints, or of tuples of numbers, in one C pass, writing each
object's exact type as a code byte before its value: about 75 ns a record for keys and values.

Only a batch whose bytes have one fixed layout is logged this way: every key an ``int`` in int32's
range (code ``i``), every value the same shape of ``int`` (``i``, four bytes) and ``float`` (``g``,
eight bytes), alone or in a tuple (``(`` and its length). A few strided slices of the bytes (a C loop
each) check that: marshal writes a ``bool``, an int beyond int32, a list, a string and a numpy scalar
(as bytes) with other codes or lengths, and such a batch takes ``change_log``'s other ways. The
writer thread reads a log's batches of one layout as one numpy structured array, the columns
``state_columns`` would have built.

Marshal's format is CPython's own and may change between versions, but these bytes never leave the
process: the interpreter that wrote them reads them back, within one checkpoint interval or two.
"""
from __future__ import annotations

import itertools
import marshal
from typing import Any, Sequence

from millstream.engine.runtime.state.state_columns import _DTYPES, _MAX_ARITY, Columns

try:
    import numpy as np
except ImportError:  # a bare Python on a Spark executor: nothing is logged (``dump`` returns None)
    np = None

# Version 2: one code byte per object and fixed widths - no back-references (version 3 adds them for
# objects referenced twice, as a batch's small ints are) and no short forms (version 4).
_VERSION = 2
_HEADER = 5  # a list's code "[" and its length, an int32
_LIST, _TUPLE, _INT = ord("["), ord("("), ord("i")
# a number's code -> (its spec in state_columns, its width in the bytes, its numpy type there)
_LEAVES = {_INT: ("q", 4, "<i4"), ord("g"): ("d", 8, "<f8")}
_runs: dict[tuple[int, int], bytes] = {}  # (byte, n) -> that byte n times, what a strided slice must equal


class Layout:
    """One value shape's fixed layout in marshal's bytes: its ``state_columns`` spec, the bytes an item
    takes (``stride``), the code bytes every item has at fixed offsets (``checks``), and a structured
    numpy type that reads an item's numbers (fields ``v0``, ``v1``, ...)."""

    __slots__ = ("spec", "stride", "checks", "dtype")

    def __init__(self, spec: Any, stride: int, checks: tuple[tuple[int, int], ...], dtype: Any) -> None:
        self.spec = spec
        self.stride = stride
        self.checks = checks
        self.dtype = dtype


_layouts: dict[tuple[int, ...], Layout] = {}  # a value shape -> its layout, made once


def _layout(vb: bytes) -> Layout | None:
    """The layout of the batch's first value, or None where it is not numbers (alone or in a tuple)."""
    code = vb[_HEADER]
    if code in _LEAVES:
        shape: tuple[int, ...] = (code,)
    elif code == _TUPLE:
        n = int.from_bytes(vb[_HEADER + 1 : _HEADER + 5], "little", signed=True)
        if not 0 < n <= _MAX_ARITY:
            return None
        leaves, at = [], _HEADER + 5
        for _ in range(n):
            leaf = vb[at] if at < len(vb) else -1
            if leaf not in _LEAVES:
                return None
            leaves.append(leaf)
            at += 1 + _LEAVES[leaf][1]
        shape = (_TUPLE, *leaves)
    else:
        return None
    if shape not in _layouts:
        _layouts[shape] = _make_layout(shape)
    return _layouts[shape]


def _make_layout(shape: tuple[int, ...]) -> Layout:
    if shape[0] != _TUPLE:
        spec, width, fmt = _LEAVES[shape[0]]
        dtype = np.dtype([("c0", "S1"), ("v0", fmt)])
        return Layout(spec, 1 + width, ((0, shape[0]),), dtype)
    leaves = shape[1:]
    n = len(leaves)
    checks = [(0, _TUPLE), *((1 + i, b) for i, b in enumerate(n.to_bytes(4, "little")))]
    fields: list[tuple[str, str]] = [("t", "S1"), ("n", "<i4")]
    at = 5
    for i, leaf in enumerate(leaves):
        _, width, fmt = _LEAVES[leaf]
        checks.append((at, leaf))
        fields += [(f"c{i}", "S1"), (f"v{i}", fmt)]
        at += 1 + width
    spec = tuple(_LEAVES[leaf][0] for leaf in leaves)
    return Layout(spec, at, tuple(checks), np.dtype(fields))


def _run(byte: int, n: int) -> bytes:
    run = _runs.get((byte, n))
    if run is None:
        if len(_runs) > 4096:  # batch sizes vary little; a bound all the same
            _runs.clear()
        run = _runs[(byte, n)] = bytes((byte,)) * n
    return run


def _fits(b: bytes, n: int, stride: int, checks: Sequence[tuple[int, int]]) -> bool:
    """``b`` is a marshalled list of ``n`` items of ``stride`` bytes each with the code bytes of
    ``checks`` at their offsets. Sound as a parse: each checked code fixes its object's length, so
    every item starts where the one before it ends."""
    if len(b) != _HEADER + n * stride or b[0] != _LIST or int.from_bytes(b[1:_HEADER], "little") != n:
        return False
    for off, byte in checks:
        if b[_HEADER + off :: stride] != _run(byte, n):
            return False
    return True


_KEY_LAYOUT = _make_layout((_INT,)) if np is not None else None  # keys: ints in int32's range


class Marshalled:
    """A logged batch: its keys' and values' bytes, and the values' layout."""

    __slots__ = ("name", "keys", "values", "layout", "count")

    def __init__(self, name: str, keys: bytes, values: bytes, layout: Layout, count: int) -> None:
        self.name = name
        self.keys = keys
        self.values = values
        self.layout = layout
        self.count = count


def dump(name: str, keys: list[Any], values: list[Any]) -> Marshalled | None:
    """The batch (``keys[i]`` wrote ``values[i]``; both non-empty lists of one length) as marshal's
    bytes, or None where it does not have the layout above. Task thread."""
    if np is None or type(keys[0]) is not int:  # string keys, say: not even one pass
        return None
    n = len(keys)
    try:
        kb = marshal.dumps(keys, _VERSION)
        if not _fits(kb, n, _KEY_LAYOUT.stride, _KEY_LAYOUT.checks):
            return None
        vb = marshal.dumps(values, _VERSION)
    except ValueError:  # not marshal's: class instances, IntEnums, deep nesting
        return None
    if len(vb) <= _HEADER:
        return None
    layout = _layout(vb)
    if layout is None or not _fits(vb, n, layout.stride, layout.checks):
        return None
    return Marshalled(name, kb, vb, layout, n)


def decoded(batches: Sequence[Any]) -> list[Any]:
    """``batches`` with each run of ``Marshalled`` batches of one table and layout read as one
    ``Columns`` (in order; other batches as they are). Writer thread: a few numpy calls a run."""
    out: list[Any] = []
    for kind, run in itertools.groupby(batches, lambda b: (b.name, b.layout) if type(b) is Marshalled else None):
        if kind is None:
            out.extend(run)
        else:
            out.append(_columns(list(run)))
    return out


def _numbers(parts: list[bytes], layout: Layout) -> list[Any]:
    """The number fields of a run's items (each part a batch's bytes), in the columns' own types."""
    items = np.frombuffer(b"".join(memoryview(b)[_HEADER:] for b in parts), dtype=layout.dtype)
    codes = layout.spec if isinstance(layout.spec, tuple) else (layout.spec,)
    return [items[f"v{i}"].astype(_DTYPES[code]) for i, code in enumerate(codes)]


def _columns(run: list[Marshalled]) -> Columns:
    (keys,) = _numbers([b.keys for b in run], _KEY_LAYOUT)
    cols = _numbers([b.values for b in run], run[0].layout)
    return Columns(run[0].name, keys, run[0].layout.spec, tuple(cols), np.empty(0, dtype=np.int64))


def objects(b: Marshalled) -> tuple[list[Any], list[Any]]:
    """The batch as the Python objects it was made of: exactly those types (the layout says so)."""
    return marshal.loads(b.keys), marshal.loads(b.values)


def keys(b: Marshalled) -> list[Any]:
    """The batch's keys as the ints they were (``objects`` without building the values)."""
    return marshal.loads(b.keys)
