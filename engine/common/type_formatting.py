"""How ``print()`` writes a record: the string PyFlink prints for the stream's declared type.

PyFlink prints a stream of Python objects (no type, or PICKLED_BYTE_ARRAY) with Python's
``str``, and a Row stream as ``+I[f0,f1]`` built in Python from the row's fields. Every other
type is printed by Java, so the record shows as its Java object would: ``(a,15)`` for a
tuple, ``true``, ``1.0E10``, ``2024-01-02 03:04:05.0``, ``{a=1}``, ``[I@1b6d3586``...
These forms were recorded from PyFlink 2.3 (tests/engine/common/test_type_formatting.py).
"""
from __future__ import annotations

import datetime
import decimal
import math
from typing import Any, Callable

from millstream.engine.common.java_hash_map import java_hash_map_order
from millstream.engine.common.row import Row
from millstream.engine.common.typeinfo import (
    BasicArrayTypeInfo,
    BasicType,
    BasicTypeInfo,
    DateTypeInfo,
    ExternalTypeInfo,
    ListTypeInfo,
    LocalTimeTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    PickledBytesTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TimestampTypeInfo,
    TimeTypeInfo,
    TupleTypeInfo,
    TypeInformation,
    float32_text,
    to_float32,
)


def record_formatter(type_info: TypeInformation | None) -> Callable[[Any], str]:
    """The function print() applies to each record of a stream of this type.

    Untyped streams get ``str`` itself (strings pass through), so printing them costs what it
    always did.
    """
    if type_info is None or isinstance(type_info, PickledBytesTypeInfo):
        return _python_str
    if isinstance(type_info, ExternalTypeInfo):
        return record_formatter(type_info._type_info)
    if isinstance(type_info, RowTypeInfo):
        # A Row is printed as the Python function made it (PyFlink chains its printing map to
        # that function: a FLOAT field still shows 0.1); anything else is first made a Row.
        arrays = frozenset(i for i, t in enumerate(type_info.get_field_types()) if isinstance(t, _LIST_TYPES))
        if arrays:
            # PyFlink's row holds array and list fields as Python lists; ours may hold the equal
            # tuples (the wire keeps a list nested in a record as a tuple).
            return lambda v: _python_row_with_lists(v if isinstance(v, Row) else type_info.coerce(v), arrays)
        return lambda v: _python_row(v if isinstance(v, Row) else type_info.coerce(v))
    if isinstance(type_info, BasicTypeInfo) and type_info._basic_type is BasicType.STRING:
        return lambda v: "null" if v is None else str(v)
    return lambda v: java_string(type_info.coerce(v), type_info)


def format_record(value: Any, type_info: TypeInformation | None) -> str:
    return record_formatter(type_info)(value)


def _python_str(v: Any) -> str:
    return v if type(v) is str else str(v)


def _python_row(row: Row) -> str:
    # PyFlink builds this string in Python: the kind, then str() of each field.
    return f"{row.get_row_kind()}[{','.join(str(v) for v in row)}]"


_LIST_TYPES = (PrimitiveArrayTypeInfo, BasicArrayTypeInfo, ObjectArrayTypeInfo, ListTypeInfo)


def _python_row_with_lists(row: Row, lists: frozenset[int]) -> str:
    fields = (str(list(v)) if i in lists and isinstance(v, tuple) else str(v) for i, v in enumerate(row))
    return f"{row.get_row_kind()}[{','.join(fields)}]"


# -- Java's toString ------------------------------------------------------------------------
def java_string(value: Any, type_info: TypeInformation | None) -> str:
    """``value.toString()`` of the Java object Flink holds for a value of this type."""
    if value is None:
        return "null"
    if type_info is None or isinstance(type_info, PickledBytesTypeInfo):
        return str(value)
    if isinstance(type_info, ExternalTypeInfo):
        return java_string(value, type_info._type_info)
    if isinstance(type_info, BasicTypeInfo):
        return _java_basic(value, type_info._basic_type)
    if isinstance(type_info, TupleTypeInfo):
        # Tuple.toString: no spaces; arrays inside print their elements (arrayAwareToString).
        return "(" + ",".join(_java_nested(v, t) for v, t in zip(value, type_info.get_field_types())) + ")"
    if isinstance(type_info, RowTypeInfo):
        # A Row inside a Java structure prints with Row.toString: "+I[a, 1]".
        kind = value.get_row_kind() if isinstance(value, Row) else "+I"
        return f"{kind}[" + ", ".join(_java_nested(v, t) for v, t in zip(value, type_info.get_field_types())) + "]"
    if isinstance(type_info, ListTypeInfo):
        return "[" + ", ".join(java_string(v, type_info.elem_type) for v in value) + "]"
    if isinstance(type_info, MapTypeInfo):
        kt, vt = type_info._key_type_info, type_info._value_type_info
        items = java_hash_map_order(list(value.items()), kt)
        return "{" + ", ".join(f"{java_string(k, kt)}={java_string(v, vt)}" for k, v in items) + "}"
    if isinstance(type_info, (PrimitiveArrayTypeInfo, BasicArrayTypeInfo, ObjectArrayTypeInfo)):
        # A top-level Java array prints as its class and identity hash, e.g. [I@1b6d3586.
        return f"{_java_array_class(type_info)}@{_identity_hash(value)}"
    if isinstance(type_info, DateTypeInfo):
        return value.isoformat() if isinstance(value, datetime.date) else str(value)
    if isinstance(type_info, TimeTypeInfo):
        return value.strftime("%H:%M:%S") if isinstance(value, datetime.time) else str(value)
    if isinstance(type_info, TimestampTypeInfo):
        return java_sql_timestamp(value) if isinstance(value, datetime.datetime) else str(value)
    if isinstance(type_info, LocalTimeTypeInfo):
        return _java_local_time(value)
    return str(value)


def _java_nested(value: Any, type_info: TypeInformation) -> str:
    """A field inside a tuple or row: arrays print their elements."""
    if value is not None and isinstance(type_info, (PrimitiveArrayTypeInfo, BasicArrayTypeInfo, ObjectArrayTypeInfo)):
        if isinstance(value, (bytes, bytearray)):
            return "[" + ", ".join(str(b - 256 if b > 127 else b) for b in value) + "]"
        return "[" + ", ".join(_java_nested(v, type_info.elem_type) for v in value) + "]"
    return java_string(value, type_info)


def _java_basic(value: Any, basic: BasicType) -> str:
    if basic is BasicType.BOOLEAN:
        return "true" if value else "false"
    if basic is BasicType.DOUBLE:
        return java_double(float(value))
    if basic is BasicType.FLOAT:
        return java_float(float(value))
    if basic is BasicType.BIG_DEC:
        return str(decimal.Decimal(value))
    if basic is BasicType.INSTANT:
        return _java_instant(value)
    return str(value)


def java_double(x: float) -> str:
    """Double.toString: shortest digits, plain from 10^-3 to 10^7, else 1.0E10 style."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return _java_decimal(repr(x), x)


def java_float(x: float) -> str:
    """Float.toString: the shortest digits that identify the 32-bit float."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    f = to_float32(x)
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return _java_decimal(float32_text(f), f)


def _java_decimal(text: str, x: float) -> str:
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign, digits, exp = decimal.Decimal(text).as_tuple()
    ds = list(digits)
    while len(ds) > 1 and ds[-1] == 0:  # 100.0 is 1 x 10^2
        ds.pop()
        exp += 1  # type: ignore[operator]
    point = len(ds) + exp  # type: ignore[operator]  # digits before the decimal point
    s = "".join(map(str, ds))
    neg = "-" if sign else ""
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{neg}0.{'0' * -point}{s}"
        if point >= len(s):
            return f"{neg}{s}{'0' * (point - len(s))}.0"
        return f"{neg}{s[:point]}.{s[point:]}"
    return f"{neg}{s[0]}.{s[1:] or '0'}E{point - 1}"


def java_sql_timestamp(ts: datetime.datetime) -> str:
    """java.sql.Timestamp.toString; PyFlink keeps milliseconds: ``2024-01-02 03:04:05.678``, ``... 05.0``."""
    millis = ts.microsecond // 1000
    frac = f"{millis:03d}".rstrip("0") or "0"
    return ts.strftime("%Y-%m-%d %H:%M:%S") + "." + frac


def _java_instant(value: Any) -> str:
    # Instant.toString: ISO-8601 in UTC, fraction only when not zero.
    millis = value.to_epoch_milli() if hasattr(value, "to_epoch_milli") else int(value)
    dt = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=millis)
    base = dt.strftime("%Y-%m-%dT%H:%M:%S")
    return base + (f".{millis % 1000:03d}" if millis % 1000 else "") + "Z"


def _java_local_time(value: Any) -> str:
    if isinstance(value, datetime.datetime):
        text = value.isoformat(timespec="microseconds" if value.microsecond else "seconds")
    elif isinstance(value, datetime.time):
        text = value.isoformat(timespec="microseconds" if value.microsecond else "seconds")
    else:
        return str(value)
    if text.endswith(":00") and text.count(":") == (3 if isinstance(value, datetime.datetime) else 2):
        text = text[:-3]  # LocalTime.toString leaves out zero seconds
    return text


_ARRAY_CODES = {
    BasicType.INT: "I",
    BasicType.LONG: "J",
    BasicType.SHORT: "S",
    BasicType.BYTE: "B",
    BasicType.FLOAT: "F",
    BasicType.DOUBLE: "D",
    BasicType.BOOLEAN: "Z",
    BasicType.CHAR: "C",
}
_JAVA_CLASSES = {
    BasicType.STRING: "java.lang.String",
    BasicType.INT: "java.lang.Integer",
    BasicType.LONG: "java.lang.Long",
    BasicType.SHORT: "java.lang.Short",
    BasicType.BYTE: "java.lang.Byte",
    BasicType.FLOAT: "java.lang.Float",
    BasicType.DOUBLE: "java.lang.Double",
    BasicType.BOOLEAN: "java.lang.Boolean",
    BasicType.CHAR: "java.lang.Character",
    BasicType.BIG_INT: "java.math.BigInteger",
    BasicType.BIG_DEC: "java.math.BigDecimal",
    BasicType.INSTANT: "java.time.Instant",
}


def _java_array_class(t: TypeInformation) -> str:
    el = t.elem_type  # type: ignore[attr-defined]
    if isinstance(t, PrimitiveArrayTypeInfo) and isinstance(el, BasicTypeInfo) and el._basic_type in _ARRAY_CODES:
        return "[" + _ARRAY_CODES[el._basic_type]
    if isinstance(el, BasicTypeInfo):
        return f"[L{_JAVA_CLASSES.get(el._basic_type, 'java.lang.Object')};"
    if isinstance(el, RowTypeInfo):
        return "[Lorg.apache.flink.types.Row;"
    return "[Ljava.lang.Object;"


def _identity_hash(value: Any) -> str:
    # Java prints an object's identity hash; any stable-looking 31-bit value will do.
    return f"{(id(value) * 2654435761) & 0x7FFFFFFF:x}"
