"""``from_collection``'s source: a fixed list, read by one subtask."""
from __future__ import annotations

from typing import Any

from engine.datastream.connectors.source import Source, SourceReader


class _ListReader(SourceReader):
    def __init__(self, values: list[Any], offset: int) -> None:
        self.values = values
        self.offset = offset

    def poll_batch(self, max_records: int) -> list[Any] | None:
        if self.offset >= len(self.values):
            return None
        batch = self.values[self.offset : self.offset + max_records]
        self.offset += len(batch)
        return batch

    def snapshot(self) -> Any:
        return self.offset


class CollectionSource(Source):
    parallel = False

    def __init__(self, values: list[Any]) -> None:
        self.values = list(values)

    def is_bounded(self) -> bool:
        return True

    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> SourceReader:
        return _ListReader(self.values, int(position or 0))

    def name(self) -> str:
        return "Collection Source"
