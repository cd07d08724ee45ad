"""The declared key type of ``key_by(..., key_type)``, reduced to what decides a key's hash.

PyFlink turns a key into the Java object of its declared type before Flink hashes it, so the type
decides which subtask a key lands on (``millstream.engine.runtime.key_hash``). A spec is that type as nested
tuples of names, picklable and cheap to compare: ``"STRING"``, ``"INT"``, ``"LONG"``,
``"BOOLEAN"``, ``"DOUBLE"``, ``"FLOAT"``, ``("TUPLE", (spec, ...))``, ``("ROW", (spec, ...), (name, ...))``;
``None`` for no key type (the key is pickled) or a type with no spec (hashed as if pickled).
"""
from __future__ import annotations

from typing import Any

from millstream.engine.common.typeinfo import BasicTypeInfo, ExternalTypeInfo, RowTypeInfo, TupleTypeInfo

KeySpec = Any  # None | str | tuple[str, tuple[KeySpec, ...]]

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
