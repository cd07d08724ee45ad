"""``from_collection``'s source: a fixed list, read by one subtask.

Its one split is ``[next index, end index]`` into the list. With a declared type each element
is turned into that type once, here, as PyFlink does: a Row with the type's field names for
ROW_NAMED, a tuple for TUPLE, a float for DOUBLE...; a value that cannot be is refused with
an error naming it, before the job is submitted.
"""
from __future__ import annotations

from typing import Any

from engine.common.java_hash_map import pickled_dict_order
from engine.common.typeinfo import MapTypeInfo, TypeInformation
from engine.datastream.connectors.number_seq import RangeSplitReader, _pairs
from engine.datastream.connectors.source import Source, SourceReader, check_position


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
    if isinstance(type_info, MapTypeInfo) and isinstance(value, dict):
        # PyFlink's elements reach Java through its pickle reader, which reorders a dict's items.
        return dict(pickled_dict_order(list(value.items())))
    return value
