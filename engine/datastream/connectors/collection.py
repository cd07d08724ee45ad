"""``from_collection``'s source: a fixed list, read by one subtask.

Its one split is ``[next index, end index]`` into the list. With a declared type each element
is turned into that type once, here, as PyFlink does: a Row with the type's field names for
ROW_NAMED, a tuple for TUPLE, a float for DOUBLE...; a value that cannot be is refused with
an error naming it, before the job is submitted.
"""
from __future__ import annotations

from typing import Any

from millstream.engine.common.java_hash_map import pickled_dict_order
from millstream.engine.common.row import Row
from millstream.engine.common.typeinfo import (
    BasicArrayTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    ObjectArrayTypeInfo,
    RowTypeInfo,
    TupleTypeInfo,
    TypeInformation,
)
from millstream.engine.datastream.connectors.number_seq import RangeSplitReader, _pairs
from millstream.engine.datastream.connectors.source import Source, SourceReader, check_position


class CollectionSource(Source):
    parallel = False

    def __init__(self, values: list[Any], type_info: TypeInformation | None = None) -> None:
        if type_info is not None and not isinstance(type_info, TypeInformation):
            raise TypeError(f"type_info must be a TypeInformation (Types.*), got {type(type_info).__name__}")
        self.values = [_conform(v, type_info, i) for i, v in enumerate(values)] if type_info is not None else list(values)

    def is_bounded(self) -> bool:
        return True

    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> SourceReader:
        splits = check_position(self, position)
        if splits is None:
            splits = [[0, len(self.values)]]
        return _ListReader(self.values, _pairs(self, splits))

    def name(self) -> str:
        return "Collection Source"


class _ListReader(RangeSplitReader):
    def __init__(self, values: list[Any], splits: list[list[int]]) -> None:
        super().__init__(splits)
        self.values = values

    def records(self, lo: int, hi: int) -> list[Any]:
        return self.values[lo:hi]


def _conform(value: Any, type_info: TypeInformation, index: int) -> Any:
    try:
        value = type_info.coerce(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"from_collection: element {index} ({value!r}) is not a {type_info!r}: {e}") from None
    return _as_read_by_java(value, type_info)


def _as_read_by_java(value: Any, t: TypeInformation) -> Any:
    """PyFlink's elements reach Java through its pickle reader, which reorders every dict's items."""
    if value is None:
        return None
    if isinstance(t, MapTypeInfo) and isinstance(value, dict):
        kt, vt = t._key_type_info, t._value_type_info
        return {_as_read_by_java(k, kt): _as_read_by_java(v, vt) for k, v in pickled_dict_order(list(value.items()))}
    if isinstance(t, TupleTypeInfo) and isinstance(value, tuple):
        return tuple(_as_read_by_java(v, ft) for v, ft in zip(value, t.get_field_types()))
    if isinstance(t, RowTypeInfo) and isinstance(value, Row):
        for i, ft in enumerate(t.get_field_types()):
            value[i] = _as_read_by_java(value[i], ft)
        return value
    if isinstance(t, (ListTypeInfo, ObjectArrayTypeInfo, BasicArrayTypeInfo)) and isinstance(value, list):
        return [_as_read_by_java(v, t.elem_type) for v in value]
    return value
