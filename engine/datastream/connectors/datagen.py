"""``DataGeneratorSource``: ``generator_function(index)`` for index 0..count-1, optionally rate-limited.

Split states: bounded, ``[next index, end index]`` (one contiguous range per
subtask at the start); unbounded, ``[k, stride, residue]`` generating the
indices ``k*stride + residue`` for k = k, k+1, ... (subtask i of p starts with
``[0, p, i]``). After a rescale a reader may hold several splits: it reads
bounded ones in turn and round-robins over unbounded ones.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from millstream.engine.datastream.connectors.number_seq import split_range
from millstream.engine.datastream.connectors.source import Source, SourceReader, check_position

MAX_BURST_S = 1.0  # how many seconds of records a rate-limited reader that fell behind may emit at once


class _GeneratorReader(SourceReader):
    def __init__(self, fn: Callable[[int], Any], splits: list[list[int]], bounded: bool, per_second: float | None) -> None:
        self.fn = fn
        self.splits = splits
        self.bounded = bounded
        self.per_second = per_second
        self.started: float | None = None  # the rate's clock starts at the first poll, not while the task opens
        self.emitted = 0
        self.turn = 0  # which unbounded split is next

    def _allowed(self, n: int) -> int:
        if not self.per_second:
            return n
        # Emit only what the rate allows so far; an empty batch lets the task idle.
        now = time.monotonic()
        if self.started is None:
            self.started = now
        elapsed = now - self.started
        allowed = int(elapsed * self.per_second) - self.emitted
        burst = max(1, int(self.per_second * MAX_BURST_S))
        if allowed > burst:
            # A reader that could not keep up (a stalled task, a slow start) stores at most a second
            # of records, as Flink's rate limiter does: it does not make up the lost time in one burst.
            self.started += (allowed - burst) / self.per_second
            allowed = burst
        if allowed <= 0:
            # Until the next record is due, but never past the task's next buffer flush (max_idle_s):
            # at 10 records/s a 50 ms nap held each record in its buffer 50 ms, not the 10 ms timeout.
            next_record = (self.emitted + 1) / self.per_second - elapsed
            time.sleep(max(0.0, min(0.05, next_record, self.max_idle_s)))
            return 0
        return min(n, allowed)

    def poll_batch(self, max_records: int) -> list[Any] | None:
        fn = self.fn
        if self.bounded:
            while self.splits and self.splits[0][0] >= self.splits[0][1]:
                self.splits.pop(0)
            if not self.splits:
                return None
            n = self._allowed(max_records)
            split = self.splits[0]
            stop = min(split[0] + n, split[1])
            batch = [fn(i) for i in range(split[0], stop)]
            split[0] = stop
        else:
            if not self.splits:
                return []  # an unbounded subtask left without splits after a rescale idles
            n = self._allowed(max_records)
            split = self.splits[self.turn % len(self.splits)]
            self.turn += 1
            k, stride, residue = split
            batch = [fn(j * stride + residue) for j in range(k, k + n)]
            split[0] = k + n
        self.emitted += len(batch)
        return batch

    def snapshot(self) -> list[Any]:
        if self.bounded:
            return [[a, b] for a, b in self.splits if a < b]
        return [list(s) for s in self.splits]


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
        splits = check_position(self, position)
        width = 2 if self.count is not None else 3
        if splits is None:
            if self.count is None:
                splits = [[0, parallelism, subtask]]
            else:
                splits = [list(split_range(0, self.count - 1, subtask, parallelism))]
        for s in splits:
            if not (isinstance(s, (list, tuple)) and len(s) == width and all(isinstance(x, int) for x in s)):
                shape = "[next, end]" if width == 2 else "[k, stride, residue]"
                raise TypeError(f"{self.name()}: a split state must be {shape}, got {s!r}")
        return _GeneratorReader(self.generator_function, [list(s) for s in splits], self.count is not None, per_subtask)

    def name(self) -> str:
        return "Data Generator"
