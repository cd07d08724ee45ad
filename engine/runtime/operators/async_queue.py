"""The pure core of the async wait operator: Flink's stream element queues and the retry decision.

No threads, no clock of its own. A queue holds the records whose AsyncFunction calls are in
flight (and the watermarks between them) up to its capacity, and hands out what may leave:
``OrderedStreamElementQueue`` in input order, ``UnorderedStreamElementQueue`` as calls complete,
but never across a watermark (a watermark leaves once every record before it left, and no record
after it leaves before it), as Flink's AsyncWaitOperator does.
"""
from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Union

RECORD, WATERMARK = "record", "watermark"


@dataclass(eq=False)
class RecordEntry:
    """One input record and, once its call completed, its results."""

    value: Any
    timestamp: int | None
    seq: int = 0
    results: list[Any] | None = None
    segment: Any = None  # the unordered queue's segment holding it

    @property
    def done(self) -> bool:
        return self.results is not None


@dataclass(eq=False)
class WatermarkEntry:
    watermark: int
    seq: int = 0
    done: bool = True


Entry = Union[RecordEntry, WatermarkEntry]


class StreamElementQueue:
    """What both queues share: capacity (records and watermarks both take a place, as in Flink)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._size = 0
        self._seq = itertools.count()

    def __len__(self) -> int:
        return self._size

    def is_full(self) -> bool:
        return self._size >= self.capacity

    def put_record(self, value: Any, timestamp: int | None) -> RecordEntry:
        """Add a record whose call is about to start (the caller keeps to the capacity)."""
        entry = RecordEntry(value, timestamp, next(self._seq))
        self._add(entry)
        self._size += 1
        return entry

    def put_watermark(self, watermark: int) -> None:
        self._add(WatermarkEntry(watermark, next(self._seq)))
        self._size += 1

    def complete(self, entry: RecordEntry, results: list[Any]) -> None:
        """The call of ``entry`` produced ``results`` (a completed entry stays until it may leave)."""
        if entry.done:
            return  # a late second completion (after a timeout, say) is ignored, as in Flink
        entry.results = list(results)
        self._completed(entry)

    def pop_completed(self) -> list[Entry]:
        """Everything that may leave now, in the order it must be emitted."""
        out = list(self._pop())
        self._size -= len(out)
        return out

    def values(self) -> list[Entry]:
        """Every entry not emitted yet, in input order: what a checkpoint keeps."""
        return sorted(self._entries(), key=lambda e: e.seq)

    # -- per ordering ----------------------------------------------------------------
    def _add(self, entry: Entry) -> None:
        raise NotImplementedError

    def _completed(self, entry: RecordEntry) -> None:
        raise NotImplementedError

    def _pop(self) -> Iterator[Entry]:
        raise NotImplementedError

    def _entries(self) -> Iterator[Entry]:
        raise NotImplementedError


class OrderedStreamElementQueue(StreamElementQueue):
    """Entries leave strictly in input order: a completed record waits for every earlier one."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._queue: deque[Entry] = deque()

    def _add(self, entry: Entry) -> None:
        self._queue.append(entry)

    def _completed(self, entry: RecordEntry) -> None:
        pass

    def _pop(self) -> Iterator[Entry]:
        q = self._queue
        while q and q[0].done:
            yield q.popleft()

    def _entries(self) -> Iterator[Entry]:
        return iter(self._queue)


@dataclass(eq=False)
class _Segment:
    """The records between two watermarks, and the watermark that closes them (None: still open)."""

    pending: dict[int, RecordEntry] = field(default_factory=dict)  # by seq: calls in flight
    ready: deque[RecordEntry] = field(default_factory=deque)  # completed, not emitted
    watermark: WatermarkEntry | None = None


class UnorderedStreamElementQueue(StreamElementQueue):
    """Records leave as they complete within their segment; segments leave in order, each
    followed by its watermark."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._segments: deque[_Segment] = deque()

    def _open_segment(self) -> _Segment:
        if not self._segments or self._segments[-1].watermark is not None:
            self._segments.append(_Segment())
        return self._segments[-1]

    def _add(self, entry: Entry) -> None:
        segment = self._open_segment()
        if isinstance(entry, WatermarkEntry):
            segment.watermark = entry
        else:
            entry.segment = segment
            segment.pending[entry.seq] = entry

    def _completed(self, entry: RecordEntry) -> None:
        segment = entry.segment
        del segment.pending[entry.seq]
        segment.ready.append(entry)

    def _pop(self) -> Iterator[Entry]:
        segments = self._segments
        while segments:
            first = segments[0]
            while first.ready:
                yield first.ready.popleft()
            if first.pending or first.watermark is None:
                return  # calls in flight before the watermark, or the open last segment
            yield first.watermark
            segments.popleft()

    def _entries(self) -> Iterator[Entry]:
        for segment in self._segments:
            yield from segment.pending.values()
            yield from segment.ready
            if segment.watermark is not None:
                yield segment.watermark


def create_queue(ordered: bool, capacity: int) -> StreamElementQueue:
    return OrderedStreamElementQueue(capacity) if ordered else UnorderedStreamElementQueue(capacity)


def retry_backoff_ms(
    strategy: Any,
    attempt: int,
    result: list[Any] | None,
    error: BaseException | None,
    elapsed_ms: float,
    timeout_ms: int,
) -> int | None:
    """After attempt ``attempt`` (the first is 1) produced ``result`` or raised ``error``: the delay
    before the next attempt, or None when this outcome is final.

    An outcome asks for a retry when the strategy's predicate says so; a retry happens while the
    strategy allows another attempt and the record's timeout has not passed (PyFlink's rule).
    """
    predicate = strategy.get_retry_predicate()
    on_result: Callable[[list[Any]], bool] | None = predicate.result_predicate()
    on_error: Callable[[Exception], bool] | None = predicate.exception_predicate()
    wanted = (error is None and result is not None and on_result is not None and bool(on_result(result))) or (
        error is not None and on_error is not None and bool(on_error(error))  # type: ignore[arg-type]
    )
    if not wanted or (timeout_ms > 0 and elapsed_ms > timeout_ms) or not strategy.can_retry(attempt):
        return None
    return max(int(strategy.get_backoff_time_millis(attempt)), 0)


def check_results(results: Any, function_name: str) -> list[Any]:
    """An AsyncFunction's return value as a list of records, or a clear error saying what it was."""
    if results is None:
        raise TypeError(
            f"the result of AsyncFunction {function_name} cannot be None: 'async_invoke' and 'timeout' "
            "must return a list of results (an empty list for none)"
        )
    if isinstance(results, (str, bytes, dict)) or not hasattr(results, "__iter__"):
        raise TypeError(
            f"the result of AsyncFunction {function_name} should be a list of results, got "
            f"{type(results).__name__} ({results!r:.80}); wrap a single result as [result]"
        )
    return list(results)
