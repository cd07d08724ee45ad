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

from millstream.engine.runtime.operators.aligned_window import AlignedWindowOperator


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

    def _slot(self, key: Any, start: int) -> tuple[dict[Any, Any], Any]:
        # Changed in place by the caller: the on-disk backend never evicts its current key's entry.
        self.backend.current_key = key
        wins = self.contents.get(key)
        if wins is None:
            wins = self.contents[key] = {}
        return wins, start

    def _opened(self, key: Any, start: int) -> None:
        self._holders(start).add(key)

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
