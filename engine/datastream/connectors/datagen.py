"""``DataGeneratorSource``: ``generator_function(index)`` for index 0..count-1, optionally rate-limited."""
from __future__ import annotations

import time
from typing import Any, Callable

from engine.datastream.connectors.number_seq import split_range
from engine.datastream.connectors.source import Source, SourceReader


class _GeneratorReader(SourceReader):
    def __init__(
        self,
        fn: Callable[[int], Any],
        next_index: int,
        hi: int | None,
        per_second: float | None,
    ) -> None:
        self.fn = fn
        self.next_index = next_index
        self.hi = hi
        self.per_second = per_second
        self.started = time.monotonic()
        self.emitted = 0

    def poll_batch(self, max_records: int) -> list[Any] | None:
        if self.hi is not None and self.next_index >= self.hi:
            return None
        n = max_records
        if self.per_second:
            # Emit only what the rate allows so far; an empty batch lets the task idle.
            allowed = int((time.monotonic() - self.started) * self.per_second) - self.emitted
            if allowed <= 0:
                time.sleep(min(0.05, 1.0 / self.per_second))
                return []
            n = min(n, allowed)
        stop = self.next_index + n if self.hi is None else min(self.next_index + n, self.hi)
        fn = self.fn
        batch = [fn(i) for i in range(self.next_index, stop)]
        self.emitted += stop - self.next_index
        self.next_index = stop
        return batch

    def snapshot(self) -> Any:
        return self.next_index


class DataGeneratorSource(Source):
    """Flink's DataGeneratorSource: a bounded (``count``) or unbounded (``count=None``) generator."""

    def __init__(
        self,
        generator_function: Callable[[int], Any],
        count: int | None,
        records_per_second: float | None = None,
        type_info: Any = None,
    ) -> None:
        self.generator_function = generator_function
        self.count = count
        self.records_per_second = records_per_second

    def is_bounded(self) -> bool:
        return self.count is not None

    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> SourceReader:
        per_subtask = self.records_per_second / parallelism if self.records_per_second else None
        if self.count is None:
            # Unbounded: subtask i generates indices i, i+p, ... by striding its own counter.
            fn, p, i = self.generator_function, parallelism, subtask
            return _GeneratorReader(lambda k: fn(k * p + i), position or 0, None, per_subtask)
        lo, hi = split_range(0, self.count - 1, subtask, parallelism)
        return _GeneratorReader(
            self.generator_function, lo if position is None else int(position), hi, per_subtask
        )

    def name(self) -> str:
        return "Data Generator"
