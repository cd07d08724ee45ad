"""``from_collection``'s source: a fixed list, read by one subtask.

Its one split is ``[next index, end index]`` into the list.
"""
from __future__ import annotations

from typing import Any

from engine.datastream.connectors.number_seq import RangeSplitReader, _pairs
from engine.datastream.connectors.source import Source, SourceReader, check_position


class CollectionSource(Source):
    parallel = False

    def __init__(self, values: list[Any]) -> None:
        self.values = list(values)

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
