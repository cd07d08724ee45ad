"""The declared key type of ``key_by(..., key_type)``, reduced to what decides a key's hash.

PyFlink turns a key into the Java object of its declared type before Flink hashes it, so the type
decides which subtask a key lands on (``millstream.engine.runtime.key_hash``). A spec is that type as nested
tuples of names, picklable and cheap to compare: ``"STRING"``, ``"INT"``, ``"LONG"``,
``"BOOLEAN"``, ``"DOUBLE"``, ``"FLOAT"``, ``("TUPLE", (spec, ...))``, ``("ROW", (spec, ...), (name, ...))``;
``None`` for no key type (the key is pickled) or a type with no spec (hashed as if pickled).
"""
from __future__ import annotations

from typing import Any

from millstream.engine.common.typeinfo import (
    BasicArrayTypeInfo,
    BasicTypeInfo,
    ExternalTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    PrimitiveArrayTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
)

KeySpec = Any  # None | str | tuple[str, tuple[KeySpec, ...]]


class KeyEncodingError(TypeError):
    """A key whose type has no encoding that is equal for equal keys in every process.

    Defined here, below the runtime, because ``key_by`` (the API) raises it for a declared key type and
    ``millstream.engine.runtime.key_encoding`` for an undeclared key at its first record."""

_SCALARS = {
    "String": "STRING",
    "Integer": "INT",
    "Short": "INT",  # Short.hashCode and Byte.hashCode are the value, as Integer's
    "Byte": "INT",
    "Long": "LONG",
    "Boolean": "BOOLEAN",
    "Double": "DOUBLE",
    "Float": "FLOAT",
}


def key_spec(type_info: Any) -> KeySpec:
    """The spec of a key type (see the module docstring)."""
    if type_info is None:
        return None
    if isinstance(type_info, ExternalTypeInfo):
        return key_spec(type_info._type_info)
    if type(type_info) is BasicTypeInfo:
        return _SCALARS.get(type_info._basic_type.value)
    if isinstance(type_info, (TupleTypeInfo, RowTypeInfo)):
        fields = tuple(key_spec(t) for t in type_info.get_field_types())
        if any(f is None for f in fields):
            return None
        if isinstance(type_info, TupleTypeInfo):
            return ("TUPLE", fields)
        return ("ROW", fields, tuple(type_info.get_field_names()))
    return None


def refuse_unstable_key_type(type_info: Any) -> None:
    """Raise ``KeyEncodingError`` when a declared key type's values have no stable encoding.

    Without a declared type Python cannot know a key's type before a record arrives, so such keys
    are refused at the first record (``key_encoding``); a declared type lets ``key_by`` refuse them
    when the program is built. Of the declared types only a map (a dict, whose equality is that of
    its items and which no order of bytes mirrors) has none, alone or inside a row, tuple, list or
    array; every other type's values encode stably.
    """
    if _holds_a_map(type_info):
        raise KeyEncodingError(
            f"key_by key_type {type_info!r} has no stable encoding: its keys hold a map (dict), whose "
            "equality cannot be mirrored in bytes; key by tuple(sorted(d.items())) or frozenset(d.items()) "
            "instead, declared as Types.TUPLE / Types.ROW of the items' types or left undeclared"
        )


def _holds_a_map(type_info: Any) -> bool:
    if isinstance(type_info, MapTypeInfo):
        return True
    if isinstance(type_info, ExternalTypeInfo):
        return _holds_a_map(type_info._type_info)
    if isinstance(type_info, (TupleTypeInfo, RowTypeInfo)):
        return any(_holds_a_map(t) for t in type_info.get_field_types())
    if isinstance(type_info, (ListTypeInfo, ObjectArrayTypeInfo, BasicArrayTypeInfo, PrimitiveArrayTypeInfo)):
        return _holds_a_map(type_info.elem_type)
    return False
