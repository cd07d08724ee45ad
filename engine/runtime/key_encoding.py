"""Key encoding: the bytes a key is hashed by, equal for equal keys in every process, run and restore.

``key_by`` routes a record by the bytes of its key, so two keys that Python calls equal
(``1``, ``1.0``, ``True``, ``Decimal(1)``; a tuple and a namedtuple or ``Row`` of the same
values; two frozensets built in different orders, under different hash seeds) must give
the same bytes, or one logical key is counted in two subtasks. ``canonical`` maps a key
to a value made only of msgpack's own types (str, bytes, int, float, None, arrays and
extension types), in which equal keys look alike; ``key_hash`` hashes keys through it.

Supported: str, bytes, int, float, bool, None, Decimal, Fraction, complex; tuples (and
namedtuples, ``Row``) and lists of keys; frozensets and sets; enum members; dataclasses with
the generated ``__eq__``; datetime, date, time and timedelta; subclasses of these that keep
their base's equality; and any object with a ``__millstream_key__()`` method, which must
return a supported key that is equal for equal objects (the documented hook for classes with
their own ``__eq__``). Anything else is refused with ``KeyEncodingError``: an object that
compares by identity is a new key in every record once it has crossed the network, and one
with its own ``__eq__`` has an equality that cannot be mirrored in bytes.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import fractions
from typing import Any, Callable

import msgpack

from millstream.engine.common.key_spec import KeyEncodingError  # noqa: F401 (raised here, defined below the runtime)

# Stored with keyed snapshots; state of an older version is regrouped key by key on restore.
# 1: crc32 of ``msgpack.packb(key, default=str)``; 2: crc32 of the key's bytes (equal keys alike);
# 3: Flink's murmur hash of the hash code PyFlink's Java side gives the key (``key_hash``).
KEY_ENCODING_VERSION = 3

_MIN_PACKED = -(2**63)  # msgpack's int range; wider ints become an extension
_MAX_PACKED = 2**64

# msgpack extension codes. Never renumber: they are part of the key groups of saved state.
EXT_BIGINT = 1  # decimal text (also read by key_hash)
_RATIONAL = 2  # "numerator/denominator" of a Decimal or Fraction no float equals
_COMPLEX = 3  # [real, imag], imag != 0
_SET = 4  # sorted array of the elements' packed bytes
_ENUM = 5  # [class qualname, member name]
_DATACLASS = 6  # [class qualname, [compared fields]]
_HOOK = 7  # the packed __millstream_key__() value
_DATETIME = 8  # naive: microseconds since 0001-01-01
_DATETIME_UTC = 9  # aware: microseconds since 0001-01-01 UTC
_DATE = 10  # proleptic ordinal
_TIME = 11  # naive: microseconds since midnight
_TIME_UTC = 12  # aware: microseconds since midnight minus the UTC offset
_TIMEDELTA = 13  # microseconds

HOOK = "__millstream_key__"
_FIX = (
    f"define {HOOK}(self) returning a stable value (str, int, a tuple of its fields, ...), "
    "return a tuple of its fields from the key selector, or use a @dataclass(frozen=True)"
)




def canonical(key: Any) -> Any:
    """``key`` as msgpack-native values in which equal keys are identical."""
    t = type(key)
    if t is str or t is bytes or key is None:
        return key
    if t is int:
        return key if _MIN_PACKED <= key < _MAX_PACKED else msgpack.ExtType(EXT_BIGINT, str(key).encode())
    enc = _ENCODERS.get(t)
    if enc is None:
        enc = _ENCODERS[t] = _encoder_for(t)
    return enc(key)


def pack(key: Any) -> bytes:
    """The packed canonical form: distinct for keys of distinct supported values (up to the
    class-name caveat of dataclasses and enums), used where a key must be stored as bytes."""
    return msgpack.packb(canonical(key), use_bin_type=True)


# -- numbers: every numeric type folds into int, then float, then an exact ratio ----------


def _int(i: int) -> Any:
    return i if _MIN_PACKED <= i < _MAX_PACKED else msgpack.ExtType(EXT_BIGINT, str(i).encode())


def _float(x: float) -> Any:
    if x.is_integer():  # 1.0 == 1, -0.0 == 0; NaN and infinities are not integers
        return _int(int(x))
    return x


def _rational(x: decimal.Decimal | fractions.Fraction) -> Any:
    if isinstance(x, decimal.Decimal) and not x.is_finite():
        if x.is_nan():  # never equal to anything, not even itself
            return msgpack.ExtType(_RATIONAL, b"nan")
        return float(x)  # Decimal('Infinity') == float('inf')
    n, d = x.as_integer_ratio()
    if d == 1:
        return _int(n)
    try:
        f = n / d
    except OverflowError:  # beyond any float, so equal to none
        f = None
    if f is not None and fractions.Fraction(f) == fractions.Fraction(n, d):  # Decimal('1.5') == 1.5
        return f
    return msgpack.ExtType(_RATIONAL, f"{n}/{d}".encode())


def _complex(x: complex) -> Any:
    if x.imag == 0:
        return _float(x.real)
    return msgpack.ExtType(_COMPLEX, msgpack.packb([_float(x.real), _float(x.imag)]))


# -- containers ----------------------------------------------------------------------


def _sequence(x: Any) -> list[Any]:
    return [canonical(e) for e in x]


def _set(x: Any) -> Any:
    # Iteration order depends on the hash seed and insertion history; the sorted encodings do not.
    return msgpack.ExtType(_SET, msgpack.packb(sorted(pack(e) for e in x)))


# -- dates and times -----------------------------------------------------------------

_US = dt.timedelta(microseconds=1)


def _day_us(h: int, m: int, s: int, us: int) -> int:
    return ((h * 60 + m) * 60 + s) * 1_000_000 + us


def _datetime(x: dt.datetime) -> Any:
    us = x.toordinal() * 86_400_000_000 + _day_us(x.hour, x.minute, x.second, x.microsecond)
    off = x.utcoffset()
    if off is None:  # naive datetimes are never equal to aware ones
        return msgpack.ExtType(_DATETIME, msgpack.packb(_int(us)))
    return msgpack.ExtType(_DATETIME_UTC, msgpack.packb(_int(us - off // _US)))


def _date(x: dt.date) -> Any:
    return msgpack.ExtType(_DATE, msgpack.packb(x.toordinal()))


def _time(x: dt.time) -> Any:
    us = _day_us(x.hour, x.minute, x.second, x.microsecond)
    off = x.utcoffset()
    if off is None:
        return msgpack.ExtType(_TIME, msgpack.packb(us))
    return msgpack.ExtType(_TIME_UTC, msgpack.packb(us - off // _US))


def _timedelta(x: dt.timedelta) -> Any:
    return msgpack.ExtType(_TIMEDELTA, msgpack.packb(_int(x // _US)))


# -- types by structure ----------------------------------------------------------------

_ENCODERS: dict[type, Callable[[Any], Any]] = {
    bool: int,
    float: _float,
    tuple: _sequence,
    list: _sequence,
    frozenset: _set,
    set: _set,
    decimal.Decimal: _rational,
    fractions.Fraction: _rational,
    complex: _complex,
    dt.datetime: _datetime,
    dt.date: _date,
    dt.time: _time,
    dt.timedelta: _timedelta,
}

# A subclass that keeps its base's __eq__ is equal to base values: it encodes as its base.
# datetime before date: a datetime is a date, but never equal to one.
_BASES: tuple[tuple[type, Callable[[Any], Any]], ...] = (
    (int, lambda x: _int(int.__int__(x))),
    (float, lambda x: _float(float.__float__(x))),
    (str, str.__str__),
    (bytes, bytes),
    (complex, _complex),
    (tuple, _sequence),
    (list, _sequence),
    (frozenset, _set),
    (set, _set),
    (decimal.Decimal, _rational),
    (fractions.Fraction, _rational),
    (dt.datetime, _datetime),
    (dt.date, _date),
    (dt.time, _time),
    (dt.timedelta, _timedelta),
)


def _refuse(t: type, reason: str) -> Callable[[Any], Any]:
    message = f"key of type {t.__module__}.{t.__qualname__} has no stable encoding: {reason}; {_FIX}"

    def refuse(_key: Any) -> Any:
        raise KeyEncodingError(message)

    return refuse


def _hook(t: type) -> Callable[[Any], Any]:
    def encode(x: Any) -> Any:
        return msgpack.ExtType(_HOOK, pack(getattr(x, HOOK)()))

    return encode


def _enum(t: type) -> Callable[[Any], Any]:
    name = t.__qualname__

    def encode(x: Any) -> Any:
        # Members are singletons per process; across processes a member is its class and name.
        return msgpack.ExtType(_ENUM, msgpack.packb([name, x.name if x.name is not None else canonical(x.value)]))

    return encode


def _generated_eq(t: type) -> bool:
    # dataclasses builds __eq__ with exec(); one written in the class body comes from a file.
    eq = t.__dict__.get("__eq__") or getattr(t, "__eq__", None)
    code = getattr(eq, "__code__", None)
    return code is not None and code.co_filename == "<string>"


def _dataclass(t: type) -> Callable[[Any], Any]:
    name = t.__qualname__
    fields = tuple(f.name for f in dataclasses.fields(t) if f.compare)

    def encode(x: Any) -> Any:
        return msgpack.ExtType(_DATACLASS, msgpack.packb([name, [canonical(getattr(x, f)) for f in fields]]))

    return encode


def _encoder_for(t: type) -> Callable[[Any], Any]:
    """How keys of type ``t`` encode, decided once per type (or a function that refuses them)."""
    if callable(getattr(t, HOOK, None)):
        return _hook(t)
    for base, encode in _BASES:
        if issubclass(t, base):
            if t.__eq__ is not base.__eq__ or (t.__hash__ is not base.__hash__ and base.__hash__ is not None):
                return _refuse(t, f"it redefines the equality of {base.__name__}")
            return encode
    if issubclass(t, enum.Enum):
        return _enum(t)
    if dataclasses.is_dataclass(t):
        params = getattr(t, "__dataclass_params__", None)
        if params is None or not params.eq:
            return _refuse(t, "it is a dataclass with eq=False, so it compares by identity")
        if not _generated_eq(t):
            return _refuse(t, "it is a dataclass with its own __eq__")
        if t.__hash__ is None:
            return _refuse(t, "it is a dataclass that is not hashable (use frozen=True)")
        return _dataclass(t)
    if t.__eq__ is object.__eq__:
        return _refuse(t, "it compares by identity, so every record would be a key of its own")
    return _refuse(t, "it defines its own __eq__, which cannot be mirrored in bytes")
