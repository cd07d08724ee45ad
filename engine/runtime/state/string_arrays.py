"""Strings as one buffer of UTF-8 bytes with offsets: a text column worked on in numpy.

A text column (``string_columns``) stores its strings joined by NUL as one UTF-8 text. The delta
writer and rolled compaction move such columns between frames (sorted by key group, the newest
entry of each key kept): as Python strings that is an object a string built, compared and freed
again, the cost that kept string-keyed state far slower to checkpoint than numbers (issue 16,
change 27). Here a column stays bytes: ``Strings`` holds the joined text as a uint8 array with each
string's start and length, and concatenation, a gather of strings by index, and a 64-bit hash of
each string are numpy calls over the bytes, with no object per string.

Equal strings have equal bytes (UTF-8 is canonical for a given str, lone surrogates included with
``surrogatepass``), so keys are compared as bytes. The hash (``hashes``) is a polynomial over the
bytes, the same prefix-sum form as ``key_group_batch.polynomial_hashes`` in 64 bits, mixed with the
length; it only groups candidates: ``same_as`` compares the bytes of every string with the one it
was grouped with, so a collision is found, never trusted.
"""
from __future__ import annotations

from typing import Sequence

from millstream.engine.runtime.key_group_batch import power_tables

try:
    import numpy as np
except ImportError:  # a bare Python on a Spark executor: no text column is ever held (string_columns)
    np = None

SEP = 0  # the NUL byte that joins a column's strings
_MUL_INT = 0x100000001B3  # odd: it has an inverse mod 2^64, which the prefix-sum form needs
_INV_INT = pow(_MUL_INT, -1, 1 << 64)
if np is not None:
    _U64 = np.uint64
    _pow = np.ones(1, dtype=np.uint64)
    _invpow = np.ones(1, dtype=np.uint64)
_HASH_SLICE = 65_536  # strings hashed at a time: their bytes' powers stay cached (ids and words: ~1 MB)
_KEEP_POWERS = 1 << 21  # positions whose powers stay cached (2 x 16 MiB); a longer buffer computes its own


class Strings:
    """``count`` strings: ``data`` their UTF-8 bytes joined by NUL (a uint8 array, with one more NUL
    at the end, so that every string is followed by its separator), ``starts`` and ``lengths`` in bytes."""

    __slots__ = ("data", "starts", "lengths")

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> None:
        self.data = data
        self.starts = starts
        self.lengths = lengths

    def __len__(self) -> int:
        return len(self.starts)

    @classmethod
    def of_joined(cls, joined: bytes, count: int) -> "Strings":
        """The strings of a column's text (``count`` of them joined by NUL)."""
        if not count:
            return EMPTY
        data = np.frombuffer(joined + b"\0", dtype=np.uint8)
        ends = np.flatnonzero(data == SEP)
        if len(ends) != count:
            raise ValueError(f"a text column of {count} strings holds {len(ends)}")
        starts = np.empty(count, dtype=np.int64)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        return cls(data, starts, ends - starts)

    def joined(self) -> bytes:
        """The column's text: the strings joined by NUL."""
        if not len(self):
            return b""
        if _dense(self):
            return self.data[int(self.starts[0]) : int(self.starts[-1] + self.lengths[-1])].tobytes()
        return take(self, np.arange(len(self))).data[:-1].tobytes()

    def slice(self, lo: int, hi: int) -> "Strings":
        return Strings(self.data, self.starts[lo:hi], self.lengths[lo:hi])


EMPTY = Strings(np.zeros(1, dtype=np.uint8), np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)) if np is not None else None


def _dense(s: Strings) -> bool:
    """Whether the strings lie in ``data`` one after the other, each followed by one separator."""
    return len(s) < 2 or bool(np.array_equal(s.starts[1:], s.starts[:-1] + s.lengths[:-1] + 1))


def concat(columns: Sequence[Strings]) -> Strings:
    """The strings of ``columns`` one column after the other, in one buffer."""
    columns = [c for c in columns if len(c)]
    if not columns:
        return EMPTY
    if len(columns) == 1:
        return columns[0]
    datas, starts, offset = [], [], 0
    for c in columns:
        datas.append(c.data)
        starts.append(c.starts + offset)
        offset += len(c.data)
    return Strings(np.concatenate(datas), np.concatenate(starts), np.concatenate([c.lengths for c in columns]))


def take(s: Strings, idx: np.ndarray) -> Strings:
    """The strings at ``idx``, in that order, gathered into a buffer of their own (dense)."""
    if not len(idx):
        return EMPTY
    lengths = s.lengths[idx]
    spans = lengths + 1  # each string with its separator
    out_starts = np.zeros(len(idx), dtype=np.int64)
    np.cumsum(spans[:-1], out=out_starts[1:])
    total = int(out_starts[-1] + spans[-1])
    # byte j of the output comes from s.data[src[j]]: a string's first byte from its start, the rest in order
    src = np.repeat(s.starts[idx] - out_starts, spans) + np.arange(total, dtype=np.int64)
    return Strings(s.data[src], out_starts, lengths)


def pick(s: Strings, idx: np.ndarray) -> Strings:
    """The strings at ``idx`` as a view of the same buffer: their starts and lengths only, no byte
    moved. For a selection that a later ``take`` gathers anyway (the delta writer's newest entries,
    gathered a key group at a time): one gather of the bytes instead of two. ``idx`` ascending, as
    ``newest`` gives it: readers that take a slice's bytes from its first start to its last end
    (``heap_incremental._text_key_groups``) then still find every string inside that span."""
    return Strings(s.data, s.starts[idx], s.lengths[idx])


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(M^i, M^-i) mod 2^64 for i in [0, n)."""
    global _pow, _invpow
    if len(_pow) >= n:
        return _pow, _invpow
    size = max(n, min(2 * len(_pow), _KEEP_POWERS))
    pw, inv = power_tables(size, _MUL_INT, _INV_INT, np.uint64)
    if size <= _KEEP_POWERS:
        _pow, _invpow = pw, inv
    return pw, inv


def hashes(s: Strings) -> np.ndarray:
    """A 64-bit hash of each string's bytes (uint64): ``sum b_i * M^(L-1-i)`` plus the length, mod
    2^64, as one wrapping cumulative sum over the buffer (``key_group_batch.polynomial_hashes``), a
    slice of strings at a time so that the powers of M stay cached. Equal strings hash equal;
    unequal ones may too (``same_as``)."""
    out = np.empty(len(s), dtype=np.uint64)
    for lo in range(0, len(s), _HASH_SLICE):
        part = s.slice(lo, lo + _HASH_SLICE)
        ends = part.starts + part.lengths
        a, b = int(part.starts.min()), int(ends.max())
        out[lo : lo + len(part)] = _hashes_in(s.data[a:b], part.starts - a, ends - a, part.lengths)
    return out


def _hashes_in(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    n = len(data)
    pw, inv = _powers(n + 1)
    csum = np.empty(n + 1, dtype=np.uint64)
    csum[0] = 0
    np.cumsum(data.astype(np.uint64) * inv[:n], dtype=np.uint64, out=csum[1:])
    total = csum[ends] - csum[starts]  # sum of b_p * M^-p over the string's positions
    h = total * pw[np.maximum(ends - 1, 0)]  # times M^(e-1); an empty string's total is 0
    return h + lengths.astype(np.uint64) * _U64(0x9E3779B97F4A7C15)


def same_as(s: Strings, idx: np.ndarray, other: np.ndarray) -> bool:
    """Whether string ``idx[i]`` has the same bytes as string ``other[i]`` for every i."""
    if not len(idx):
        return True
    if not np.array_equal(s.lengths[idx], s.lengths[other]):
        return False
    lengths = s.lengths[idx]
    out_starts = np.zeros(len(idx), dtype=np.int64)
    np.cumsum(lengths[:-1], out=out_starts[1:])
    total = int(out_starts[-1] + lengths[-1])
    steps = np.arange(total, dtype=np.int64)
    a = np.repeat(s.starts[idx] - out_starts, lengths) + steps
    b = np.repeat(s.starts[other] - out_starts, lengths) + steps
    return bool(np.array_equal(s.data[a], s.data[b]))


def newest(s: Strings) -> np.ndarray | None:
    """The position of each distinct string's last occurrence in ``s``, in ascending order; None if
    two different strings hash equal (the caller then compares them as objects)."""
    h = hashes(s)
    n = len(h)
    uniq, first, inverse = np.unique(h[::-1], return_index=True, return_inverse=True)
    last = n - 1 - first  # each hash's last occurrence
    winner = last[inverse][::-1]  # for every position, the last occurrence of its hash
    others = np.flatnonzero(winner != np.arange(n))
    if not same_as(s, others, winner[others]):
        return None
    return np.sort(last)
