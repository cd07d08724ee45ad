"""``NumberSequenceSource``: the numbers from..to, split evenly over subtasks."""
from __future__ import annotations

from typing import Any

from engine.datastream.connectors.source import Source, SourceReader


def split_range(start: int, end: int, subtask: int, parallelism: int) -> tuple[int, int]:
    """The inclusive-exclusive slice [lo, hi) of [start, end] owned by a subtask."""
    total = end - start + 1
    lo = start + total * subtask // parallelism
    hi = start + total * (subtask + 1) // parallelism
    return lo, hi


class _RangeReader(SourceReader):
    def __init__(self, next_value: int, hi: int) -> None:
        self.next_value = next_value
        self.hi = hi

    def poll_batch(self, max_records: int) -> list[Any] | None:
        if self.next_value >= self.hi:
            return None
        stop = min(self.next_value + max_records, self.hi)
        batch = list(range(self.next_value, stop))
        self.next_value = stop
        return batch

    def snapshot(self) -> Any:
        return self.next_value


class NumberSequenceSource(Source):
    """Emits every integer from ``start`` to ``end``, both inclusive."""

    def __init__(self, start: int, end: int) -> None:
        if end < start:
            raise ValueError(f"end {end} is before start {start}")
        self.start = int(start)
        self.end = int(end)

    def is_bounded(self) -> bool:
        return True

    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> SourceReader:
        lo, hi = split_range(self.start, self.end, subtask, parallelism)
        return _RangeReader(lo if position is None else int(position), hi)

    def name(self) -> str:
        return "Sequence Source"
