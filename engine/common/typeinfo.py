"""``Types``: PyFlink's type descriptors.

Millstream serialises records with msgpack whatever their declared type, so
these descriptors are accepted and kept on the graph for display, never needed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TypeInformation:
    """A described type, shown in plans; ``Types.TUPLE([...])`` etc. build these."""

    name: str
    args: tuple[Any, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}<{', '.join(str(a) for a in self.args)}>"


class Types:
    """Factory of ``TypeInformation`` with PyFlink's names."""

    @staticmethod
    def STRING() -> TypeInformation:
        return TypeInformation("String")

    @staticmethod
    def INT() -> TypeInformation:
        return TypeInformation("Integer")

    @staticmethod
    def LONG() -> TypeInformation:
        return TypeInformation("Long")

    @staticmethod
    def SHORT() -> TypeInformation:
        return TypeInformation("Short")

    @staticmethod
    def BYTE() -> TypeInformation:
        return TypeInformation("Byte")

    @staticmethod
    def FLOAT() -> TypeInformation:
        return TypeInformation("Float")

    @staticmethod
    def DOUBLE() -> TypeInformation:
        return TypeInformation("Double")

    @staticmethod
    def BOOLEAN() -> TypeInformation:
        return TypeInformation("Boolean")

    @staticmethod
    def CHAR() -> TypeInformation:
        return TypeInformation("Char")

    @staticmethod
    def BIG_INT() -> TypeInformation:
        return TypeInformation("BigInteger")

    @staticmethod
    def BIG_DEC() -> TypeInformation:
        return TypeInformation("BigDecimal")

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:
        return TypeInformation("Timestamp")

    @staticmethod
    def INSTANT() -> TypeInformation:
        return TypeInformation("Instant")

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:
        return TypeInformation("PickledByteArray")

    @staticmethod
    def PRIMITIVE_ARRAY(element: TypeInformation) -> TypeInformation:
        return TypeInformation("PrimitiveArray", (element,))

    @staticmethod
    def BASIC_ARRAY(element: TypeInformation) -> TypeInformation:
        return TypeInformation("BasicArray", (element,))

    @staticmethod
    def OBJECT_ARRAY(element: TypeInformation) -> TypeInformation:
        return TypeInformation("ObjectArray", (element,))

    @staticmethod
    def TUPLE(types: list[TypeInformation]) -> TypeInformation:
        return TypeInformation("Tuple", tuple(types))

    @staticmethod
    def ROW(types: list[TypeInformation]) -> TypeInformation:
        return TypeInformation("Row", tuple(types))

    @staticmethod
    def ROW_NAMED(names: list[str], types: list[TypeInformation]) -> TypeInformation:
        return TypeInformation("Row", tuple(f"{n}: {t}" for n, t in zip(names, types)))

    @staticmethod
    def MAP(key: TypeInformation, value: TypeInformation) -> TypeInformation:
        return TypeInformation("Map", (key, value))

    @staticmethod
    def LIST(element: TypeInformation) -> TypeInformation:
        return TypeInformation("List", (element,))
