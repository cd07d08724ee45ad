"""Aligned event-time windows for state backends that keep state off the heap.

``AlignedWindowOperator`` holds its accumulators on the heap, by window start.
With an on-disk backend (``state.backend=rocksdb``, on LMDB) the accumulators
must stay in the backend, so this variant keeps them in the keyed table
``_aligned_windows`` (``key -> {start: accumulator}``) and only the index of
which keys have which window start on the heap. It checkpoints that table as
it is, in the same form as the heap variant, so a savepoint of either restores
into the other.
"""
from __future__ import annotations

import heapq
from typing import Any

from engine.runtime.operators.aligned_window import _MISSING, AlignedWindowOperator


class StateTableAlignedWindowOperator(AlignedWindowOperator):
    def open(self) -> None:
        super().open()
        self.keys_by_start: dict[int, set[Any]] = {}

    def restore_state(self, state: Any) -> None:
        if state:
            self.watermark = state["watermark"]
        for key, wins in self.contents.items():
            for start in wins:
                self._holders(start).add(key)

    def keyed_tables(self) -> dict[str, tuple[str, Any]]:
        return {}  # the accumulators are in the backend's table, which the backend snapshots

    def _holders(self, start: int) -> set[Any]:
        """The keys that have window ``start``; a new start is scheduled."""
        holders = self.keys_by_start.get(start)
        if holders is None:
            holders = self.keys_by_start[start] = set()
            behind = start + self.size - 1 <= self.watermark
            heapq.heappush(self.cleanup_heap if behind else self.fire_heap, start)
        return holders

    def _reduce_tumbling(self, values: list[Any], timestamps: list[int]) -> None:
        self._add(values, timestamps)

    def _add(self, values: list[Any], timestamps: list[int]) -> None:
        ks, contents, size, slide, offset, wm = self.key_selector, self.contents, self.size, self.slide, self.offset, self.watermark
        reduce_fn = self.reduce_fn if self.is_reduce else None
        agg = None if self.is_reduce else self.function
        late_upto = wm - self.lateness - size + 1
        fired_upto = wm - size + 1
        for v, ts in zip(values, timestamps):
            starts = (ts - (ts - offset) % size,) if size == slide else self._starts(ts)
            key = _MISSING
            for start in starts:
                if start <= late_upto:
                    continue
                if key is _MISSING:
                    key = ks(v)
                    # Held across the loop and changed in place: no other key is touched meanwhile,
                    # and the on-disk backend never evicts the entry being changed (its current key).
                    self.backend.current_key = key
                    wins = contents.get(key)
                    if wins is None:
                        wins = contents[key] = {}
                acc = wins.get(start, _MISSING)
                if acc is _MISSING:
                    wins[start] = v if reduce_fn else agg.add(v, agg.create_accumulator())
                    self._holders(start).add(key)
                else:
                    wins[start] = reduce_fn(acc, v) if reduce_fn else agg.add(v, acc)
                if start <= fired_upto:
                    self._fire(key, start)
            if key is _MISSING:
                self._late(v, ts)

    def _fire(self, key: Any, start: int) -> None:
        self._emit(key, start, self.contents[key][start])

    def _fire_start(self, start: int) -> None:
        holders = self.keys_by_start.get(start, ())
        contents = self.contents
        if self.window_function is None:
            results = [contents[key][start] for key in holders]
            if not self.is_reduce:
                results = [self.function.get_result(acc) for acc in results]
            self.collector.add_records(results, start + self.size - 1)
            return
        for key in holders:
            self._emit(key, start, contents[key][start])

    def _drop_start(self, start: int) -> None:
        contents = self.contents
        for key in self.keys_by_start.pop(start, ()):
            wins = contents.get(key)
            if wins is not None:
                wins.pop(start, None)
                if wins:
                    contents[key] = wins  # changed in place: store it again for the on-disk backend
                else:
                    del contents[key]
            if self.clears:
                self._clear(key, start)
