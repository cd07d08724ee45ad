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

    def poll_batch(self, max_records: int) -> list[Any] | None:
        while self.splits and self.splits[0][0] >= self.splits[0][1]:
            self.splits.pop(0)
        if not self.splits:
            return None
        split = self.splits[0]
        stop = min(split[0] + max_records, split[1])
        batch = self.values[split[0] : stop]
        split[0] = stop
        return batch
