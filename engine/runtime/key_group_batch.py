"""``key_hash.key_group_hash`` for many keys at once, vectorised with numpy (issue 16).

A heap checkpoint grouped by key group hashes every key it writes; the scalar hash costs 3 to 7 us
a key in Python, most of it in the loops over bytes and the 32-bit arithmetic. Here those loops run
in numpy over a slice of keys at a time, and the result is exactly the scalar's for every key:

* ``LONG``/``INT`` with ``int`` keys: the Java hash code is arithmetic on the value.
* ``STRING`` with ``str`` keys: ``String.hashCode`` over the UTF-16 code units of all the slice's
  strings concatenated, as a prefix sum (below).
* no key type (``None``) with ``int`` or ``str`` keys: the key's pickle (the same bytes the scalar
  pickles: ``canonical`` leaves such a key as it is) and ``Arrays.hashCode`` over its signed bytes,
  the same prefix sum.

The polynomial hash ``h = init*31^L + sum b_i*31^(L-1-i)`` (mod 2^32) of each key's units ``b`` within
one concatenated buffer: 31 is odd, so it has an inverse mod 2^32, and with global positions ``p``
``31^(L-1-i) = 31^(e-1) * 31^-p`` (``e``: the key's end). So one wrapping uint32 cumulative sum of
``b_p * 31^-p`` gives every key's sum as a difference, times ``31^(e-1)``.

Any other key (a bool, a float, a tuple, an int out of the type's range, ``None``...) is hashed by the
scalar function, in place: the result does not depend on which path a key took.

Without numpy (``BATCHED`` false) every function here still answers, with the scalar hash and lists:
the executors of a Spark standalone cluster may run a bare Python that has only ``pyspark.zip`` and the
job's code shipped by ``addPyFile``, and a compiled package cannot be shipped that way. They import
the state backends (keyed functions keep state there) but never write a checkpoint.
"""
from __future__ import annotations

import pickle
from itertools import groupby, repeat
from operator import itemgetter
from typing import Any, Callable, Sequence

try:
    import numpy as np
except ImportError:  # a bare Python on a Spark executor (module docstring)
    np = None

from millstream.engine.common.key_spec import KeySpec
from millstream.engine.runtime.key_hash import PICKLE_PROTOCOL, key_group_hash

# Keys hashed per numpy pass: np.fromiter and the pickling hold the interpreter lock throughout,
# so a slice bounds what another thread (the task thread) waits for, a few ms.
SLICE = 32_768
BATCHED = np is not None
_INV31 = pow(31, -1, 1 << 32)
if BATCHED:
    _U32 = np.uint32
    # 31^i and 31^-i mod 2^32 for the positions of one slice's buffer, grown as needed.
    _pow = np.ones(1, dtype=np.uint32)
    _invpow = np.ones(1, dtype=np.uint32)


_KEEP_POWERS = 1 << 22  # positions whose powers stay cached (2 x 16 MiB); a longer buffer computes its own


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(31^i, 31^-i) mod 2^32 for i in [0, n]."""
    global _pow, _invpow
    if len(_pow) > n:
        return _pow, _invpow
    size = max(n + 1, min(2 * len(_pow), _KEEP_POWERS))
    pw, inv = power_tables(size, 31, _INV31, np.uint32)
    if size <= _KEEP_POWERS:
        _pow, _invpow = pw, inv
    return pw, inv


def power_tables(size: int, mul: int, inv: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """(mul^i, inv^i) for i in [0, size), in ``dtype``, whose products wrap modulo 2^bits: the
    arithmetic a polynomial hash wants (``inv`` is mul's inverse modulo 2^bits)."""
    pw = np.full(size, mul, dtype=dtype)
    pw[0] = 1
    back = np.full(size, inv, dtype=dtype)
    back[0] = 1
    return np.cumprod(pw, dtype=dtype), np.cumprod(back, dtype=dtype)


def murmur_hashes(codes: np.ndarray) -> np.ndarray:
    """``key_hash.murmur_hash`` of each uint32 hash code, as int64 (non-negative)."""
    c = codes.astype(np.uint32, copy=True)
    c *= _U32(0xCC9E2D51)
    c = (c << _U32(15)) | (c >> _U32(17))
    c *= _U32(0x1B873593)
    c = (c << _U32(13)) | (c >> _U32(19))
    c = c * _U32(5) + _U32(0xE6546B64)
    c ^= _U32(4)
    c ^= c >> _U32(16)
    c *= _U32(0x85EBCA6B)
    c ^= c >> _U32(13)
    c *= _U32(0xC2B2AE35)
    c ^= c >> _U32(16)
    s = c.view(np.int32).astype(np.int64)
    return np.where(s == -(1 << 31), 0, np.abs(s))


def polynomial_hashes(units: np.ndarray, lengths: np.ndarray, init: int) -> np.ndarray:
    """Per key, ``h = init; h = 31*h + u`` over its units (mod 2^32, uint32): the keys' units are
    ``units`` (uint32, wrapped) concatenated, ``lengths`` long each."""
    ends = np.cumsum(lengths, dtype=np.int64)
    return polynomial_hashes_at(units, ends - lengths, lengths, init)


def polynomial_hashes_at(units: np.ndarray, starts: np.ndarray, lengths: np.ndarray, init: int) -> np.ndarray:
    """``polynomial_hashes`` of keys lying anywhere in ``units``: key i is ``units[starts[i]:
    starts[i] + lengths[i]]`` (a text column's buffer, with separators between the keys)."""
    n = len(units)
    pw, inv = _powers(n)
    ends = starts + lengths
    csum = np.empty(n + 1, dtype=np.uint32)
    csum[0] = 0
    np.cumsum(units * inv[:n], dtype=np.uint32, out=csum[1:])
    total = csum[ends] - csum[starts]  # sum of u_p * 31^-p over the key's positions
    # times 31^(e-1); an empty key (e == start) contributes nothing, whatever pw[e-1] is
    h = total * pw[np.maximum(ends - 1, 0)]
    if init:
        h = h + _U32(init) * pw[lengths]
    return h


def _bytes_codes(chunks: list[bytes]) -> np.ndarray:
    """java.util.Arrays.hashCode(byte[]) of each (uint32)."""
    lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
    units = np.frombuffer(b"".join(chunks), dtype=np.int8).astype(np.uint32)  # signed bytes, wrapped
    return polynomial_hashes(units, lengths, 1)


def _string_codes(strings: list[str]) -> np.ndarray:
    """java.lang.String.hashCode of each (uint32), over UTF-16 code units."""
    joined = "".join(strings).encode("utf-16-le", "surrogatepass")
    units = np.frombuffer(joined, dtype="<u2").astype(np.uint32)
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    if int(lengths.sum()) != len(units):  # characters outside the BMP are two code units each
        lengths = np.fromiter((len(s.encode("utf-16-le", "surrogatepass")) // 2 for s in strings), dtype=np.int64, count=len(strings))
    return polynomial_hashes(units, lengths, 0)


def _int_codes(values: list[int], spec: KeySpec) -> np.ndarray | None:
    """hashCode of Java Long/Integer of each int (uint32), or None if one is out of range."""
    try:
        a = np.fromiter(values, dtype=np.int64, count=len(values))
    except OverflowError:
        return None
    return _int_array_codes(a, spec)


def _int_array_codes(a: np.ndarray, spec: KeySpec) -> np.ndarray | None:
    if spec == "INT":
        if len(a) and (a.min() < -(1 << 31) or a.max() >= 1 << 31):
            return None
        code = a.astype(np.uint32)  # Integer.hashCode: the value
    else:
        u = a.view(np.uint64)
        code = (u ^ (u >> np.uint64(32))).astype(np.uint32)  # Long.hashCode
    return code


def key_group_hashes(keys: Sequence[Any], spec: KeySpec = None) -> list[int]:
    """``[key_group_hash(k, spec) for k in keys]``, a slice of keys at a time in numpy."""
    if not BATCHED:
        return [key_group_hash(k, spec) for k in keys]
    out: list[int] = []
    for lo in range(0, len(keys), SLICE):
        out.extend(_slice_hashes(keys[lo : lo + SLICE], spec).tolist())
    return out


def assign_to_key_groups(keys: Sequence[Any], max_parallelism: int, spec: KeySpec = None) -> np.ndarray:
    """The key group of each key (``key_groups.assign_to_key_group``), as an int64 array (a list
    without numpy)."""
    if not BATCHED:
        return [key_group_hash(k, spec) % max_parallelism for k in keys]
    parts = [_slice_hashes(keys[lo : lo + SLICE], spec) % max_parallelism for lo in range(0, len(keys), SLICE)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _slice_hashes(keys: Sequence[Any], spec: KeySpec) -> np.ndarray:
    keys = list(keys)
    n = len(keys)
    kinds = set(map(type, keys))
    if len(kinds) == 1:  # the usual case: one key type, no index lists to build
        t = kinds.pop()
        fast = _fast_codes(keys, t, spec)
        if fast is not None:
            return fast
        return np.fromiter((key_group_hash(k, spec) for k in keys), dtype=np.int64, count=n)
    out = np.zeros(n, dtype=np.int64)
    done = np.zeros(n, dtype=bool)
    for t in (int, str):
        if t not in kinds:
            continue
        idx = [i for i, k in enumerate(keys) if type(k) is t]
        fast = _fast_codes([keys[i] for i in idx], t, spec)
        if fast is not None:
            where = np.asarray(idx, dtype=np.int64)
            out[where] = fast
            done[where] = True
    for i in np.flatnonzero(~done).tolist():  # anything else: the scalar hash, in place
        out[i] = key_group_hash(keys[i], spec)
    return out


def _fast_codes(values: list[Any], t: type, spec: KeySpec) -> np.ndarray | None:
    """The spread hashes of ``values`` (all of type ``t``), or None when no fast path takes them."""
    with np.errstate(over="ignore"):
        if spec is None and (t is int or t is str):
            # canonical leaves an int or a str as it is, and the scalar pickles exactly that
            codes = _bytes_codes(list(map(pickle.dumps, values, repeat(PICKLE_PROTOCOL))))
        elif t is int and spec in ("LONG", "INT"):
            codes = _int_codes(values, spec)
            if codes is None:
                return None
        elif t is str and spec == "STRING":
            codes = _string_codes(values)
        else:
            return None
        return murmur_hashes(codes + _U32(62))


def group_keys(keys: Sequence[Any], key_groups: np.ndarray) -> tuple[list[Any], list[tuple[int, int, int]]]:
    """``keys`` reordered by key group (stably), and the runs [(key group, start, end)] of the
    reordered list, in key-group order: how a checkpoint writes one part per key group."""
    (ordered,), runs = group_by_key_group(key_groups, keys)
    return ordered, runs


def group_by_key_group(key_groups: np.ndarray, *columns: Sequence[Any]) -> tuple[list[list[Any]], list[tuple[int, int, int]]]:
    """Each of ``columns`` (as long as ``key_groups``) reordered by key group, all in the same stable
    order (sorted once: keys and their values together), and the runs [(key group, start, end)]."""
    if not len(key_groups):
        return [[] for _ in columns], []
    if not BATCHED:
        return _group_by_key_group_scalar(list(key_groups), columns)
    order, runs = key_group_order(key_groups)
    idx = order.tolist()
    return [take(column, idx) for column in columns], runs


def key_group_order(key_groups: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """The stable order that sorts ``key_groups`` (a non-empty numpy array), and the runs [(key group,
    start, end)] of the sorted order: ``group_by_key_group``'s, for a caller that takes the items later."""
    # a stable sort of small integers is a radix sort in numpy: linear in the keys
    kgs = key_groups.astype(np.uint16) if int(key_groups.max()) < 1 << 16 else key_groups
    order = np.argsort(kgs, kind="stable")
    ordered = kgs[order]
    cuts = (np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist()
    return order, [(int(ordered[s]), s, e) for s, e in zip([0, *cuts], [*cuts, len(key_groups)])]


def _group_by_key_group_scalar(kgs: list[int], columns: tuple[Sequence[Any], ...]) -> tuple[list[list[Any]], list[tuple[int, int, int]]]:
    order = sorted(range(len(kgs)), key=kgs.__getitem__)  # sorted() is stable
    runs: list[tuple[int, int, int]] = []
    start = 0
    for kg, run in groupby(kgs[i] for i in order):
        end = start + sum(1 for _ in run)
        runs.append((kg, start, end))
        start = end
    return [take(column, order) for column in columns], runs


def take(items: Sequence[Any], idx: list[int]) -> list[Any]:
    """``[items[i] for i in idx]``, in C."""
    # itemgetter: one C loop, a few times faster than a comprehension; in pieces, so that another
    # thread waiting for the interpreter lock waits one piece at most
    out: list[Any] = []
    for lo in range(0, len(idx), SLICE):
        piece = idx[lo : lo + SLICE]
        got = itemgetter(*piece)(items)
        if len(piece) == 1:
            out.append(got)
        else:
            out.extend(got)
    return out


class KeyGrouper:
    """``assign_to_key_groups`` of a backend's max parallelism and key type, for many calls."""

    __slots__ = ("max_parallelism", "spec")

    def __init__(self, max_parallelism: int, spec: KeySpec = None) -> None:
        self.max_parallelism = max_parallelism
        self.spec = spec

    def __call__(self, keys: Sequence[Any]) -> np.ndarray:
        return assign_to_key_groups(keys, self.max_parallelism, self.spec)

    def of_ints(self, a: np.ndarray) -> np.ndarray | None:
        """The key groups of int keys given as an int64 array (a caller that has them so already: the
        heap writer's typed columns), or None where the key type hashes them otherwise (by pickle)."""
        if self.spec not in ("LONG", "INT"):
            return None
        with np.errstate(over="ignore"):
            codes = _int_array_codes(a, self.spec)
            if codes is None:
                return None
            return murmur_hashes(codes + _U32(62)) % self.max_parallelism


    def of_text(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, ascii_only: bool) -> np.ndarray | None:
        """The key groups of string keys given as UTF-8 bytes (a text column's buffer ``data``, uint8;
        key i at ``starts[i]``, ``lengths[i]`` bytes long; ``ascii_only``: every byte is ASCII), or
        None where no batch form of this key type's hash takes them. ``STRING`` hashes a key's UTF-16
        code units, which are its bytes when it is ASCII; no key type (``None``) hashes the key's
        pickle, which for a string under 256 bytes is a fixed header, its UTF-8 bytes and a fixed
        trailer (``_pickled_str_codes``)."""
        with np.errstate(over="ignore"):
            if self.spec == "STRING" and ascii_only:
                codes = polynomial_hashes_at(data.astype(np.uint32), starts, lengths, 0)
            elif self.spec is None and (not len(lengths) or int(lengths.max()) < 252):
                codes = _pickled_str_codes(data, starts, lengths)
            else:
                return None
            return murmur_hashes(codes + _U32(62)) % self.max_parallelism


# pickle.dumps(s, PICKLE_PROTOCOL) of a str of L < 252 UTF-8 bytes (surrogatepass, as pickle encodes):
# PROTO 5, FRAME and its length L + 4 (8 bytes little-endian: one byte, then zeros), SHORT_BINUNICODE,
# L, the bytes, MEMOIZE, STOP
_PICKLE_HEAD = (0x80, PICKLE_PROTOCOL, 0x95)
_PICKLE_TAIL = (0x94, 0x2E)


def _signed(b: int) -> np.uint32:
    """A byte as Java's signed byte, wrapped into uint32 (the hash's arithmetic)."""
    return _U32((b - 256 if b >= 128 else b) % (1 << 32))


def _pickled_str_codes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``java.util.Arrays.hashCode`` (signed bytes) of the pickle of each string, the strings given as
    their UTF-8 bytes in ``data``, each under 252 bytes: the header's hash (it holds the length),
    continued over the string's bytes and the trailer, as over the whole pickle."""
    n = len(lengths)
    length = lengths.astype(np.uint32)
    h = np.full(n, 1, dtype=np.uint32)
    for b in _PICKLE_HEAD:
        h = h * _U32(31) + _signed(b)
    for field in (length + _U32(4), None, None, None, None, None, None, None):  # the frame's length
        h = h * _U32(31)
        if field is not None:
            h = h + field - np.where(field >= 128, _U32(256), _U32(0))
    h = h * _U32(31) + _signed(0x8C)  # SHORT_BINUNICODE
    h = h * _U32(31) + length - np.where(length >= 128, _U32(256), _U32(0))
    body = polynomial_hashes_at(data.view(np.int8).astype(np.uint32), starts, lengths, 0)
    pw, _ = _powers(int(lengths.max()) + 1 if n else 1)
    h = h * pw[lengths] + body  # the hash so far, continued over the string's bytes
    for b in _PICKLE_TAIL:
        h = h * _U32(31) + _signed(b)
    return h


def key_grouper(max_parallelism: int, spec: KeySpec = None) -> KeyGrouper:
    """``assign_to_key_groups`` of a backend's max parallelism and key type, for many calls."""
    return KeyGrouper(max_parallelism, spec)
