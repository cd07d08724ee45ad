"""The hash code Flink's key-group partitioner computes for a PyFlink key, so ``key_by`` routes as PyFlink does.

PyFlink's ``key_by`` sends ``Row(key, value)`` to Java, where ``KeyByKeySelector`` wraps the key in
a one-field ``Row``; ``KeyGroupRangeAssignment`` then takes that Row's ``hashCode()``. The Java
object the key becomes depends on the ``key_type``: without one the key is pickled (cloudpickle,
protocol 5) into a ``byte[]``; ``Types.STRING()`` makes a ``String``, ``Types.INT()`` an
``Integer``, ``Types.TUPLE`` a Flink ``TupleN``, ``Types.ROW`` a ``Row``, and so on. A Row hashes
its fields as ``h = 1; h = 31*h + (0 if null else 31 + field.hashCode())`` (recorded from PyFlink
2.3.0's JVM), so a key hashes to ``62 + hashCode(key)`` (``31`` for null).

Equal keys must still hash alike in every process (issue 13): the key is first brought to its
``key_encoding.canonical`` form (``True`` -> ``1``, ``2.0`` -> ``2``, a Row or list -> a tuple), and
that value is what is pickled or converted. So keys PyFlink would tell apart but Python calls equal
(``1`` and ``True``, ``2`` and ``2.0``) route as the int, and a key with no Java form of its declared
type, or no stable pickle (a frozenset, a dataclass, a datetime: their pickles name classes or vary
by hash seed), is hashed by its packed canonical bytes instead: stable, but not where PyFlink puts it.

The declared key type arrives as a ``KeySpec`` (``millstream.engine.common.key_spec``); ``None`` means none.
"""
from __future__ import annotations

import pickle
import struct
from typing import Any

import msgpack

from millstream.engine.common.key_spec import KeySpec
from millstream.engine.runtime.key_encoding import EXT_BIGINT, canonical


_M = 0xFFFFFFFF
_SIGNED = tuple(b - 256 if b > 127 else b for b in range(256))
# PyFlink pickles an untyped key with cloudpickle.dumps, i.e. pickle protocol 5 for these values.
PICKLE_PROTOCOL = 5

class _NoJavaForm(Exception):
    """The key has no value of the declared Java type (PyFlink would fail to serialise it)."""


# str and int keys (the usual ones) remember their spread hash: a keyed backend asks again for every
# key at every checkpoint. Equal keys share an entry, which is right: they hash alike. Bounded: once
# full, further keys are computed each time.
_CACHE: dict[tuple[Any, KeySpec], int] = {}
CACHE_KEYS = 1 << 16


def key_group_hash(key: Any, spec: KeySpec = None) -> int:
    """``murmurHash(key_hash_code(key, spec))``: what the key group is taken modulo of."""
    t = type(key)
    if t is str or t is int:
        entry = (key, spec)
        h = _CACHE.get(entry)
        if h is None:
            h = murmur_hash(key_hash_code(key, spec))
            if len(_CACHE) < CACHE_KEYS:
                _CACHE[entry] = h
        return h
    return murmur_hash(key_hash_code(key, spec))


def key_hash_code(key: Any, spec: KeySpec = None) -> int:
    """The signed 32-bit ``hashCode()`` of the Row Flink's partitioner sees for ``key``."""
    if key is None and spec is not None:
        return 31  # a null key field
    if spec is not None:
        try:
            return _int32(62 + _java_hash(key, spec))
        except _NoJavaForm:
            pass
    c = canonical(key)
    rep = _picklable(c, {})
    data = pickle.dumps(rep, protocol=PICKLE_PROTOCOL) if rep is not _NO_PICKLE else msgpack.packb(c, use_bin_type=True)
    return _int32(62 + bytes_hash_code(data))


def bytes_hash_code(data: bytes) -> int:
    """java.util.Arrays.hashCode(byte[]) (bytes are signed in Java)."""
    h = 1
    signed = _SIGNED
    for b in data:
        h = (31 * h + signed[b]) & _M
    return h


def string_hash_code(s: str) -> int:
    """java.lang.String.hashCode: over UTF-16 code units."""
    h = 0
    if s.isascii():
        for b in s.encode():
            h = (31 * h + b) & _M
        return h
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _M
    return h


def murmur_hash(code: int) -> int:
    """Flink's MathUtils.murmurHash: a non-negative spread of a 32-bit hash code."""
    code = (code * 0xCC9E2D51) & _M
    code = ((code << 15) | (code >> 17)) & _M
    code = (code * 0x1B873593) & _M
    code = ((code << 13) | (code >> 19)) & _M
    code = (code * 5 + 0xE6546B64) & _M
    code ^= 4
    code ^= code >> 16
    code = (code * 0x85EBCA6B) & _M
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & _M
    code ^= code >> 16
    code = _int32(code)
    if code >= 0:
        return code
    return -code if code != -(2**31) else 0


def _int32(v: int) -> int:
    v &= _M
    return v - (1 << 32) if v & 0x80000000 else v


def _long_hash(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return (v ^ (v >> 32)) & _M


def _java_hash(v: Any, spec: KeySpec) -> int:
    """hashCode() of the Java object of type ``spec`` that the key value ``v`` becomes."""
    if v is None:
        return 0
    if isinstance(spec, tuple):
        return _composite_hash(v, spec)
    c = canonical(v)
    if type(c) is msgpack.ExtType and c.code == EXT_BIGINT:
        c = int(c.data)
    if spec == "STRING":
        if type(c) is not str:
            raise _NoJavaForm
        return string_hash_code(c)
    if spec == "INT":
        if type(c) is not int or not -(2**31) <= c < 2**31:
            raise _NoJavaForm
        return c & _M
    if spec == "LONG":
        if type(c) is not int or not -(2**63) <= c < 2**63:
            raise _NoJavaForm
        return _long_hash(c)
    if spec == "BOOLEAN":
        if c not in (0, 1) or type(c) is not int:
            raise _NoJavaForm
        return 1231 if c else 1237
    if spec == "DOUBLE":
        if type(c) not in (int, float):
            raise _NoJavaForm
        try:
            x = float(c)
        except OverflowError:
            raise _NoJavaForm from None
        if x != x:
            return _long_hash(0x7FF8000000000000)  # doubleToLongBits: one NaN
        return _long_hash(struct.unpack(">q", struct.pack(">d", x))[0])
    if spec == "FLOAT":
        if type(c) not in (int, float):
            raise _NoJavaForm
        try:
            bits = struct.unpack(">i", struct.pack(">f", float(c)))[0]
        except (OverflowError, struct.error):
            raise _NoJavaForm from None
        return 0x7FC00000 if c != c else bits & _M
    raise _NoJavaForm


def _composite_hash(v: Any, spec: tuple[Any, ...]) -> int:
    from millstream.engine.common.row import Row, RowKind

    kind, specs = spec[0], spec[1]
    if isinstance(v, Row):
        if v.get_row_kind() is not RowKind.INSERT:
            raise _NoJavaForm
        names = v._names()
        if names is None:
            fields = list(v)
        elif kind == "ROW" and sorted(names) == sorted(spec[2]):
            # PyFlink's row coder writes a named row's fields in the type's order, so equal rows
            # (named in any order) are one Java row.
            by_name = dict(zip(names, v))
            fields = [by_name[n] for n in spec[2]]
        else:
            raise _NoJavaForm
    elif isinstance(v, (tuple, list)):
        fields = list(v)
    else:
        raise _NoJavaForm
    if len(fields) != len(specs):
        raise _NoJavaForm
    if kind == "TUPLE":  # Flink's TupleN.hashCode
        h = 0
        for i, (f, s) in enumerate(zip(fields, specs)):
            h = _java_hash(f, s) if i == 0 else (31 * h + _java_hash(f, s)) & _M
        return h
    h = 1  # Row.hashCode
    for f, s in zip(fields, specs):
        h = (31 * h + (0 if f is None else 31 + _java_hash(f, s))) & _M
    return h


_NO_PICKLE = object()


def _picklable(c: Any, seen: dict[Any, Any]) -> Any:
    """The canonical value as the plain Python value PyFlink would have pickled (tuples for arrays),
    or _NO_PICKLE when it holds a value whose pickle is not stable. Equal strings, bytes and
    tuples become one object, so the pickle's memo references do not depend on object identity."""
    t = type(c)
    if c is None or t is int or t is float:
        return c
    if t is str or t is bytes:
        return seen.setdefault((t, c), c)
    if t is list:
        items = []
        for e in c:
            p = _picklable(e, seen)
            if p is _NO_PICKLE:
                return _NO_PICKLE
            items.append(p)
        tup = tuple(items)
        try:
            return seen.setdefault((tuple, tup), tup)
        except TypeError:
            return tup
    if t is msgpack.ExtType and c.code == EXT_BIGINT:
        return int(c.data)
    return _NO_PICKLE
