"""``NumberSequenceSource``: the numbers from..to, split evenly over subtasks.

A split is ``[next, end)`` as the list ``[next, end]``; each subtask starts with
one split, and a restore at another parallelism hands whole splits around.
"""
from __future__ import annotations

from typing import Any

from millstream.engine.datastream.connectors.source import Source, SourceReader, check_position


def split_range(start: int, end: int, subtask: int, parallelism: int) -> tuple[int, int]:
    """The inclusive-exclusive slice [lo, hi) of [start, end] owned by a subtask."""
    total = end - start + 1
    lo = start + total * subtask // parallelism
    hi = start + total * (subtask + 1) // parallelism
    return lo, hi


class RangeSplitReader(SourceReader):
    """Reads ``[next, end)`` splits one after another; ``produce(i)`` makes the record of index i."""

    def __init__(self, splits: list[list[int]], produce: Any = None) -> None:
        self.splits = [[int(a), int(b)] for a, b in splits if int(a) < int(b)]
        self.produce = produce

    def records(self, lo: int, hi: int) -> list[Any]:
        """The records of indexes [lo, hi); subclasses with a cheaper way (a list slice) override it."""
        rng = range(lo, hi)
        return list(rng) if self.produce is None else [self.produce(i) for i in rng]

    def poll_batch(self, max_records: int) -> list[Any] | None:
        while self.splits and self.splits[0][0] >= self.splits[0][1]:
            self.splits.pop(0)
        if not self.splits:
            return None
        split = self.splits[0]
        lo = split[0]
        split[0] = min(lo + max_records, split[1])
        return self.records(lo, split[0])

    def snapshot(self) -> list[Any]:
        return [[a, b] for a, b in self.splits if a < b]


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
        splits = check_position(self, position)
        if splits is None:
            lo, hi = split_range(self.start, self.end, subtask, parallelism)
            splits = [[lo, hi]]
        return RangeSplitReader(_pairs(self, splits))

    def name(self) -> str:
        return "Sequence Source"


def _pairs(source: Source, splits: list[Any]) -> list[list[int]]:
    out = []
    for s in splits:
        if not (isinstance(s, (list, tuple)) and len(s) == 2 and all(isinstance(x, int) for x in s)):
            raise TypeError(f"{source.name()}: a split state must be [next, end], got {s!r}")
        out.append([s[0], s[1]])
    return out
