"""``Types`` and the ``TypeInformation`` classes of ``pyflink.common.typeinfo``.

Records travel as msgpack whatever their declared type, so a type never slows the
data plane. It matters at the edges, as in PyFlink: ``from_collection`` turns each
element into the declared type once (``coerce``), ``print()`` writes the form Flink
prints for that type (``millstream.engine.common.type_formatting``) and ``execute_and_collect``
hands records back as that type (msgpack turns lists into tuples on the way).
"""
from __future__ import annotations

import datetime
import decimal
import struct
from enum import Enum
from typing import Any

from millstream.engine.common.row import Row


class TypeInformation:
    """A declared record type. ``coerce`` is Millstream's: the value as Python code of a
    stream of this type receives it (PyFlink gets the same by a round trip through Java)."""

    def need_conversion(self) -> bool:
        return False

    def to_internal_type(self, obj: Any) -> Any:
        return obj

    def from_internal_type(self, obj: Any) -> Any:
        return obj

    def get_java_type_info(self) -> Any:
        raise NotImplementedError("Millstream runs without a JVM; there is no Java type information")

    def coerce(self, value: Any, collected: bool = False) -> Any:
        """``collected``: as ``execute_and_collect`` returns it, which differs for floats and byte arrays."""
        return value

    def __hash__(self) -> int:
        return hash(repr(self))


class BasicType(Enum):
    STRING = "String"
    BYTE = "Byte"
    BOOLEAN = "Boolean"
    SHORT = "Short"
    INT = "Integer"
    LONG = "Long"
    FLOAT = "Float"
    DOUBLE = "Double"
    CHAR = "Char"
    BIG_INT = "BigInteger"
    BIG_DEC = "BigDecimal"
    INSTANT = "Instant"


def to_float32(x: float) -> float:
    """``x`` rounded to the nearest 32-bit float, as a Java float holds it."""
    return struct.unpack("f", struct.pack("f", x))[0]


def float32_text(x: float) -> str:
    """The shortest decimal digits that identify ``x`` as a 32-bit float (what Float.toString shows)."""
    f = to_float32(x)
    if f != f or f in (float("inf"), float("-inf")):
        return repr(f)
    for p in range(1, 10):
        s = f"{f:.{p}g}"
        if to_float32(float(s)) == f:
            return s
    return repr(f)


class BasicTypeInfo(TypeInformation):
    """Strings, numbers, booleans, chars, BigInteger and BigDecimal."""

    def __init__(self, basic_type: BasicType) -> None:
        self._basic_type = basic_type

    def coerce(self, value: Any, collected: bool = False) -> Any:
        if value is None:
            return None
        b = self._basic_type
        if b in (BasicType.DOUBLE, BasicType.FLOAT) and isinstance(value, (int, float)) and not isinstance(value, bool):
            if b is BasicType.DOUBLE:
                return float(value)
            # A float goes through Java's float: Python operators then see the rounded value, while
            # execute_and_collect parses Java's text of it (0.1 stays 0.1).
            return float(float32_text(value)) if collected else to_float32(value)
        if b is BasicType.BIG_DEC and isinstance(value, (int, float)) and not isinstance(value, bool):
            return decimal.Decimal(value)
        return value

    def __eq__(self, o: object) -> bool:
        return isinstance(o, BasicTypeInfo) and self._basic_type == o._basic_type

    def __hash__(self) -> int:
        return hash(self._basic_type)

    def __repr__(self) -> str:
        return self._basic_type.value

    @staticmethod
    def STRING_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.STRING)

    @staticmethod
    def BOOLEAN_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.BOOLEAN)

    @staticmethod
    def BYTE_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.BYTE)

    @staticmethod
    def SHORT_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.SHORT)

    @staticmethod
    def INT_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.INT)

    @staticmethod
    def LONG_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.LONG)

    @staticmethod
    def FLOAT_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.FLOAT)

    @staticmethod
    def DOUBLE_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.DOUBLE)

    @staticmethod
    def CHAR_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.CHAR)

    @staticmethod
    def BIG_INT_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.BIG_INT)

    @staticmethod
    def BIG_DEC_TYPE_INFO() -> "BasicTypeInfo":
        return BasicTypeInfo(BasicType.BIG_DEC)

    @staticmethod
    def INSTANT_TYPE_INFO() -> "InstantTypeInfo":
        return InstantTypeInfo(BasicType.INSTANT)


class InstantTypeInfo(BasicTypeInfo):
    """``pyflink.common.time.Instant`` values."""

    def need_conversion(self) -> bool:
        return True


class DateTypeInfo(TypeInformation):
    def need_conversion(self) -> bool:
        return True

    def __eq__(self, o: object) -> bool:
        return isinstance(o, DateTypeInfo)

    def __hash__(self) -> int:
        return hash("DateTypeInfo")

    def __repr__(self) -> str:
        return "DateTypeInfo"


class TimeTypeInfo(TypeInformation):
    def need_conversion(self) -> bool:
        return True

    def coerce(self, value: Any, collected: bool = False) -> Any:
        # java.sql.Time holds whole seconds at most milliseconds; PyFlink hands back the time
        # truncated to milliseconds.
        if isinstance(value, datetime.time) and value.microsecond % 1000:
            return value.replace(microsecond=value.microsecond - value.microsecond % 1000)
        return value

    def __eq__(self, o: object) -> bool:
        return isinstance(o, TimeTypeInfo)

    def __hash__(self) -> int:
        return hash("TimeTypeInfo")

    def __repr__(self) -> str:
        return "TimeTypeInfo"


class TimestampTypeInfo(TypeInformation):
    def need_conversion(self) -> bool:
        return True

    def __eq__(self, o: object) -> bool:
        return isinstance(o, TimestampTypeInfo)

    def __hash__(self) -> int:
        return hash("TimestampTypeInfo")

    def __repr__(self) -> str:
        return "TimestampTypeInfo"


class SqlTimeTypeInfo:
    """Factory of the java.sql date and time types."""

    @staticmethod
    def DATE() -> DateTypeInfo:
        return DateTypeInfo()

    @staticmethod
    def TIME() -> TimeTypeInfo:
        return TimeTypeInfo()

    @staticmethod
    def TIMESTAMP() -> TimestampTypeInfo:
        return TimestampTypeInfo()


class LocalTimeTypeInfo(TypeInformation):
    """java.time's LocalDate, LocalTime and LocalDateTime."""

    class TimeType(Enum):
        LOCAL_DATE = 0
        LOCAL_TIME = 1
        LOCAL_DATE_TIME = 2

    def __init__(self, time_type: "LocalTimeTypeInfo.TimeType") -> None:
        self._time_type = time_type

    def __eq__(self, o: object) -> bool:
        return isinstance(o, LocalTimeTypeInfo) and self._time_type == o._time_type

    def __hash__(self) -> int:
        return hash(self._time_type)

    def __repr__(self) -> str:
        return f"LocalTimeTypeInfo<{self._time_type.name}>"


class _ElementsTypeInfo(TypeInformation):
    """Arrays and lists: Python code sees a list of elements of the element type."""

    _label = ""

    def __init__(self, element_type: TypeInformation) -> None:
        self._element_type = element_type

    @property
    def elem_type(self) -> TypeInformation:
        return self._element_type

    def coerce(self, value: Any, collected: bool = False) -> Any:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, (bytes, bytearray)):
            if not collected:
                return value
            # execute_and_collect hands a Java byte[] back as a list of (signed) ints.
            return [b - 256 if b > 127 else b for b in value]
        el = self._element_type
        return [el.coerce(v, collected) for v in value]

    def __eq__(self, o: object) -> bool:
        return type(o) is type(self) and self._element_type == o._element_type  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self._label, self._element_type))

    def __repr__(self) -> str:
        return f"{self._label}<{self._element_type}>"


class PrimitiveArrayTypeInfo(_ElementsTypeInfo):
    _label = "PrimitiveArrayTypeInfo"


class BasicArrayTypeInfo(_ElementsTypeInfo):
    _label = "BasicArrayTypeInfo"


class ObjectArrayTypeInfo(_ElementsTypeInfo):
    _label = "ObjectArrayTypeInfo"


class ListTypeInfo(_ElementsTypeInfo):
    _label = "ListTypeInfo"


class MapTypeInfo(TypeInformation):
    def __init__(self, key_type_info: TypeInformation, value_type_info: TypeInformation) -> None:
        self._key_type_info = key_type_info
        self._value_type_info = value_type_info

    def coerce(self, value: Any, collected: bool = False) -> Any:
        if value is None:
            return None
        k, v = self._key_type_info, self._value_type_info
        return {k.coerce(a, collected): v.coerce(b, collected) for a, b in dict(value).items()}

    def __eq__(self, o: object) -> bool:
        return (
            isinstance(o, MapTypeInfo)
            and self._key_type_info == o._key_type_info
            and self._value_type_info == o._value_type_info
        )

    def __hash__(self) -> int:
        return hash((self._key_type_info, self._value_type_info))

    def __repr__(self) -> str:
        return f"MapTypeInfo<{self._key_type_info}, {self._value_type_info}>"


class PickledBytesTypeInfo(TypeInformation):
    """Any Python object; what a stream without a declared type carries."""

    def __eq__(self, o: object) -> bool:
        return isinstance(o, PickledBytesTypeInfo)

    def __hash__(self) -> int:
        return hash("PickledByteArrayTypeInfo")

    def __repr__(self) -> str:
        return "PickledByteArrayTypeInfo"


class RowTypeInfo(TypeInformation):
    """Rows; without names their fields are called f0, f1, ... as in Java."""

    def __init__(self, field_types: list[TypeInformation], field_names: list[str] | None = None) -> None:
        self._field_types = list(field_types)
        self._field_names = list(field_names) if field_names is not None else None
        if self._field_names is not None and len(self._field_names) != len(self._field_types):
            raise ValueError(
                f"ROW_NAMED has {len(self._field_names)} names for {len(self._field_types)} types"
            )

    def get_field_names(self) -> list[str]:
        if self._field_names is None:
            return [f"f{i}" for i in range(len(self._field_types))]
        return list(self._field_names)

    def get_field_index(self, field_name: str) -> int:
        if self._field_names:
            return self._field_names.index(field_name)
        return -1

    def get_field_types(self) -> list[TypeInformation]:
        return list(self._field_types)

    def need_conversion(self) -> bool:
        return True

    def coerce(self, value: Any, collected: bool = False) -> Any:
        """A Row with this type's field names; keeps a Row's kind; takes a tuple, list, dict,
        Row or object with attributes, as PyFlink's conversion does."""
        if value is None:
            return None
        names = self.get_field_names()
        kind = None
        if isinstance(value, Row):
            kind = value.get_row_kind()
            named = value._names()
            values = [value[n] for n in names] if named and set(names) <= set(named) else list(value)
        elif isinstance(value, dict):
            values = [value.get(n) for n in names]
        elif isinstance(value, (tuple, list)):
            values = list(value)
        elif hasattr(value, "__dict__"):
            values = [value.__dict__.get(n) for n in names]
        else:
            raise ValueError(f"cannot make a row of {type(value).__name__} {value!r} for {self!r}")
        if len(values) != len(names):
            raise ValueError(f"{value!r} has {len(values)} fields, {self!r} has {len(names)}")
        row = Row(*[t.coerce(v, collected) for t, v in zip(self._field_types, values)])
        row.set_field_names(names)
        if kind is not None:
            row.set_row_kind(kind)
        return row

    def __eq__(self, o: object) -> bool:
        return isinstance(o, RowTypeInfo) and self._field_types == o._field_types

    def __hash__(self) -> int:
        return hash(tuple(self._field_types))

    def __repr__(self) -> str:
        if self._field_names:
            inner = ", ".join(f"{n}: {t}" for n, t in zip(self._field_names, self._field_types))
        else:
            inner = ", ".join(str(t) for t in self._field_types)
        return f"RowTypeInfo({inner})"


class TupleTypeInfo(TypeInformation):
    """Java tuples: Python code sees a tuple."""

    def __init__(self, field_types: list[TypeInformation]) -> None:
        self._field_types = list(field_types)

    def get_field_types(self) -> list[TypeInformation]:
        return list(self._field_types)

    def need_conversion(self) -> bool:
        return True

    def coerce(self, value: Any, collected: bool = False) -> Any:
        if value is None:
            return None
        if not isinstance(value, (tuple, list, Row)):
            raise ValueError(f"cannot make a tuple of {type(value).__name__} {value!r} for {self!r}")
        if len(value) != len(self._field_types):
            raise ValueError(f"{value!r} has {len(value)} fields, {self!r} has {len(self._field_types)}")
        return tuple(t.coerce(v, collected) for t, v in zip(self._field_types, value))

    def __eq__(self, o: object) -> bool:
        return isinstance(o, TupleTypeInfo) and self._field_types == o._field_types

    def __hash__(self) -> int:
        return hash(("Tuple", *self._field_types))

    def __repr__(self) -> str:
        return f"TupleTypeInfo({', '.join(str(t) for t in self._field_types)})"


class ExternalTypeInfo(TypeInformation):
    """A Table API type wrapped for the DataStream API; behaves as the type it wraps."""

    def __init__(self, type_info: TypeInformation) -> None:
        self._type_info = type_info

    def coerce(self, value: Any, collected: bool = False) -> Any:
        return self._type_info.coerce(value, collected)

    def __eq__(self, o: object) -> bool:
        return isinstance(o, ExternalTypeInfo) and self._type_info == o._type_info

    def __hash__(self) -> int:
        return hash(("External", self._type_info))

    def __repr__(self) -> str:
        return f"ExternalTypeInfo<{self._type_info}>"


def is_pickled(type_info: TypeInformation | None) -> bool:
    """True for a stream of arbitrary Python objects: no declared type, or PICKLED_BYTE_ARRAY."""
    return type_info is None or isinstance(type_info, PickledBytesTypeInfo)


class Types:
    """Factory of ``TypeInformation`` with PyFlink's names."""

    @staticmethod
    def STRING() -> TypeInformation:
        return BasicTypeInfo.STRING_TYPE_INFO()

    @staticmethod
    def BYTE() -> TypeInformation:
        return BasicTypeInfo.BYTE_TYPE_INFO()

    @staticmethod
    def BOOLEAN() -> TypeInformation:
        return BasicTypeInfo.BOOLEAN_TYPE_INFO()

    @staticmethod
    def SHORT() -> TypeInformation:
        return BasicTypeInfo.SHORT_TYPE_INFO()

    @staticmethod
    def INT() -> TypeInformation:
        return BasicTypeInfo.INT_TYPE_INFO()

    @staticmethod
    def LONG() -> TypeInformation:
        return BasicTypeInfo.LONG_TYPE_INFO()

    @staticmethod
    def FLOAT() -> TypeInformation:
        return BasicTypeInfo.FLOAT_TYPE_INFO()

    @staticmethod
    def DOUBLE() -> TypeInformation:
        return BasicTypeInfo.DOUBLE_TYPE_INFO()

    @staticmethod
    def CHAR() -> TypeInformation:
        return BasicTypeInfo.CHAR_TYPE_INFO()

    @staticmethod
    def BIG_INT() -> TypeInformation:
        return BasicTypeInfo.BIG_INT_TYPE_INFO()

    @staticmethod
    def BIG_DEC() -> TypeInformation:
        return BasicTypeInfo.BIG_DEC_TYPE_INFO()

    @staticmethod
    def INSTANT() -> TypeInformation:
        return BasicTypeInfo.INSTANT_TYPE_INFO()

    @staticmethod
    def SQL_DATE() -> TypeInformation:
        return SqlTimeTypeInfo.DATE()

    @staticmethod
    def SQL_TIME() -> TypeInformation:
        return SqlTimeTypeInfo.TIME()

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:
        return SqlTimeTypeInfo.TIMESTAMP()

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:
        return PickledBytesTypeInfo()

    @staticmethod
    def ROW(field_types: list[TypeInformation]) -> TypeInformation:
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: list[str], field_types: list[TypeInformation]) -> TypeInformation:
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: list[TypeInformation]) -> TypeInformation:
        return TupleTypeInfo(field_types)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return PrimitiveArrayTypeInfo(element_type)

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return BasicArrayTypeInfo(element_type)

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return ObjectArrayTypeInfo(element_type)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> TypeInformation:
        return MapTypeInfo(key_type_info, value_type_info)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> TypeInformation:
        return ListTypeInfo(element_type_info)
