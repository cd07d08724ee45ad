"""Per-key event-time and processing-time timers (Flink's InternalTimerService).

Pure: time comes from a clock function and watermarks are pushed in, so tests
drive it with a fake clock. A (key, timestamp) pair is registered at most once
per time domain. Deletion is lazy but bounded: a deleted timer's heap entry
stays until it is popped, unless tombstones come to outnumber live timers,
when the heap is rebuilt from the live ones, so a job that keeps registering
and deleting far-future timers uses memory for its live timers only.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable

EVENT_TIME = "EVENT_TIME"
PROCESSING_TIME = "PROCESSING_TIME"


_COMPACT_MIN = 64  # below this many heap entries a rebuild is not worth it


class _TimerQueue:
    def __init__(self) -> None:
        self.heap: list[tuple[int, int, Any]] = []
        self.live: set[tuple[int, Any]] = set()
        self.seq = itertools.count()

    def add(self, key: Any, ts: int) -> None:
        if (ts, key) not in self.live:
            self.live.add((ts, key))
            heapq.heappush(self.heap, (ts, next(self.seq), key))

    def remove(self, key: Any, ts: int) -> None:
        self.live.discard((ts, key))
        heap = self.heap
        if len(heap) > _COMPACT_MIN and len(heap) > 2 * len(self.live):
            self._compact()

    def _compact(self) -> None:
        """Rebuild the heap from the live timers: tombstones were more than half of it. A timer deleted
        and registered again has two entries; only the first of them survives (it fires once anyway)."""
        kept: set[tuple[int, Any]] = set()
        entries = []
        for entry in sorted(self.heap):
            pair = (entry[0], entry[2])
            if pair in self.live and pair not in kept:
                kept.add(pair)
                entries.append(entry)
        self.heap = entries  # sorted, hence already a heap

    def poll(self, limit: int) -> tuple[int, Any] | None:
        """The earliest live timer at or before ``limit``, removed; None if there is none."""
        heap, live = self.heap, self.live
        while heap and heap[0][0] <= limit:
            ts, _, key = heapq.heappop(heap)
            if (ts, key) in live:
                live.discard((ts, key))
                return ts, key
        return None

    def pop_until(self, limit: int) -> list[tuple[int, Any]]:
        fired = []
        heap, live = self.heap, self.live
        while heap and heap[0][0] <= limit:
            ts, _, key = heapq.heappop(heap)
            if (ts, key) in live:
                live.discard((ts, key))
                fired.append((ts, key))
        return fired

    def peek(self) -> int | None:
        while self.heap and (self.heap[0][0], self.heap[0][2]) not in self.live:
            heapq.heappop(self.heap)
        return self.heap[0][0] if self.heap else None

    def items(self) -> list[tuple[int, Any]]:
        return sorted(self.live, key=lambda p: p[0])


def _identity(key: Any) -> Any:
    return key


class InternalTimerService:
    """``key_of`` maps a timer's key to the state key it belongs to (a window operator's timers are
    keyed by (key, window)); snapshots group timers by that key's key group, as Flink's
    InternalTimerServiceImpl does, so rescaling moves them with the rest of the key's state."""

    def __init__(self, clock: Callable[[], int], key_of: Callable[[Any], Any] = _identity) -> None:
        self.clock = clock
        self.key_of = key_of
        self.event = _TimerQueue()
        self.processing = _TimerQueue()
        self.current_watermark = -(2**63)

    def register_event_time_timer(self, key: Any, ts: int) -> None:
        self.event.add(key, int(ts))

    def delete_event_time_timer(self, key: Any, ts: int) -> None:
        self.event.remove(key, int(ts))

    def register_processing_time_timer(self, key: Any, ts: int) -> None:
        self.processing.add(key, int(ts))

    def delete_processing_time_timer(self, key: Any, ts: int) -> None:
        self.processing.remove(key, int(ts))

    def advance_watermark(self, watermark: int) -> list[tuple[int, Any]]:
        """Event-time timers due at this watermark, in timestamp order."""
        self.current_watermark = max(self.current_watermark, watermark)
        return self.event.pop_until(self.current_watermark)

    def set_watermark(self, watermark: int) -> None:
        self.current_watermark = max(self.current_watermark, watermark)

    def poll_event_timer(self) -> tuple[int, Any] | None:
        """One due event-time timer at a time, so timers registered while firing fire too, in order."""
        return self.event.poll(self.current_watermark)

    def poll_processing_timer(self, now: int) -> tuple[int, Any] | None:
        return self.processing.poll(now)

    def due_processing_timers(self) -> list[tuple[int, Any]]:
        return self.processing.pop_until(self.clock())

    def next_processing_time(self) -> int | None:
        return self.processing.peek()

    def snapshot(self) -> dict[str, list[tuple[int, Any]]]:
        return {EVENT_TIME: self.event.items(), PROCESSING_TIME: self.processing.items()}

    def restore(self, snap: dict[str, list[tuple[int, Any]]]) -> None:
        for ts, key in snap.get(EVENT_TIME, ()):
            self.event.add(key, ts)
        for ts, key in snap.get(PROCESSING_TIME, ()):
            self.processing.add(key, ts)

    def snapshot_by_key_group(self, key_group_of: Callable[[Any], int]) -> dict[int, list[tuple[Any, list[tuple[str, int, Any]]]]]:
        """{key group: [(state key, [(domain, timestamp, timer key)])]}: the keyed snapshot's shape."""
        per_key: dict[Any, list[tuple[str, int, Any]]] = {}
        for domain, queue in ((EVENT_TIME, self.event), (PROCESSING_TIME, self.processing)):
            for ts, key in queue.items():
                per_key.setdefault(self.key_of(key), []).append((domain, ts, key))
        out: dict[int, list[tuple[Any, list[tuple[str, int, Any]]]]] = {}
        for state_key, timers in per_key.items():
            out.setdefault(key_group_of(state_key), []).append((state_key, timers))
        return out

    def restore_timers(self, timers: list[tuple[str, int, Any]]) -> None:
        """Add one key's timers from ``snapshot_by_key_group``."""
        for domain, ts, key in timers:
            key = _hashable(key)
            if domain == EVENT_TIME:
                self.event.add(key, int(ts))
            elif domain == PROCESSING_TIME:
                self.processing.add(key, int(ts))
            else:
                raise ValueError(f"unknown timer domain {domain!r} in a snapshot")


def _hashable(k: Any) -> Any:
    return tuple(_hashable(x) for x in k) if isinstance(k, list) else k
