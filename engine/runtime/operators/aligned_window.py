"""Aligned event-time windows: the fast path for tumbling and sliding windows.

Used instead of the general WindowOperator when the trigger is the default
event-time trigger, there is no evictor and the function is incremental
(reduce or aggregate). Aligned windows start at the same instants for every
key, so one timer per window start replaces one timer per (key, window), and
windows are plain integers until they fire. Results match the general operator.
"""
from __future__ import annotations

import heapq
from typing import Any

from engine.datastream.functions import AggregateFunction, Function, ProcessWindowFunction, ReduceFunction, WindowFunction
from engine.runtime.operators.base import StreamingRuntimeContext, StreamOperator
from engine.runtime.operators.results import ResultCollector
from engine.runtime.operators.window import WINDOW_STATE_PREFIX
from engine.runtime.state.namespaced import NamespacedStateStore
from engine.runtime.watermarks import MIN_WATERMARK
from engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from engine.windowing.triggers import EventTimeTrigger
from engine.windowing.windows import TimeWindow

_MISSING = object()


def is_aligned(params: dict[str, Any]) -> bool:
    return (
        type(params["assigner"]) in (TumblingEventTimeWindows, SlidingEventTimeWindows)
        and (params.get("trigger") is None or type(params.get("trigger")) is EventTimeTrigger)
        and params.get("evictor") is None
        and params["function_kind"] in ("reduce", "aggregate")
    )


class _Context(ProcessWindowFunction.Context):
    def __init__(self, op: "AlignedWindowOperator") -> None:
        self.op = op
        self.w: TimeWindow | None = None

    def window(self) -> TimeWindow:
        return self.w  # type: ignore[return-value]

    def current_processing_time(self) -> int:
        return self.op.ctx.clock()

    def current_watermark(self) -> int:
        return self.op.watermark

    def window_state(self) -> Any:
        """State of the current key and this window, dropped when the window is cleaned up."""
        return self.op.window_states

    def global_state(self) -> Any:
        """State of the current key, shared by all its windows."""
        return self.op.global_states


class AlignedWindowOperator(StreamOperator):
    def snapshot_state(self) -> Any:
        # Window contents live in keyed state; the per-start index is rebuilt from it on restore.
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state:
            self.watermark = state["watermark"]
        # Rebuild the per-start index from the restored window contents.
        for key, windows in self.contents.items():
            for start in windows:
                holders = self.keys_by_start.get(start)
                if holders is None:
                    self.keys_by_start[start] = {key}
                    end_ts = start + self.size - 1
                    heapq.heappush(self.cleanup_heap if end_ts <= self.watermark else self.fire_heap, start)
                else:
                    holders.add(key)
    def open(self) -> None:
        p = self.params
        assigner = p["assigner"]
        self.size: int = assigner.size
        self.slide: int = assigner.slide if isinstance(assigner, SlidingEventTimeWindows) else assigner.size
        self.offset: int = assigner.offset
        self.lateness = int(p.get("allowed_lateness", 0))
        self.late_tag: str | None = p.get("late_tag")
        self.window_function = p.get("window_function")
        for f in (self.function, self.window_function):
            if isinstance(f, Function):
                f.open(StreamingRuntimeContext(self.ctx))
        f = self.function
        self.is_reduce = p["function_kind"] == "reduce"
        if self.is_reduce:
            self.reduce_fn = f.reduce if isinstance(f, ReduceFunction) else f
        elif not isinstance(f, AggregateFunction):
            raise TypeError(f"'{self.ctx.operator_name}': aggregate() needs an AggregateFunction")
        assert self.ctx.keyed_backend is not None and self.ctx.key_selector is not None
        self.backend = self.ctx.keyed_backend
        self.key_selector = self.ctx.key_selector
        # key -> {window start: accumulator}; kept in the backend so snapshots include it
        self.contents: dict[Any, dict[int, Any]] = self.backend.table("_aligned_windows", "window")
        self.keys_by_start: dict[int, set[Any]] = {}
        self.fire_heap: list[int] = []  # window starts not yet fired
        self.cleanup_heap: list[int] = []  # fired starts kept for allowed lateness
        self.watermark = MIN_WATERMARK
        self.collector = ResultCollector(self)
        self.wctx = _Context(self)
        self.window_states = NamespacedStateStore(self.backend, WINDOW_STATE_PREFIX, lambda: self.wctx.w, self.ctx.operator_name)
        self.global_states = StreamingRuntimeContext(self.ctx)
        self.clears = isinstance(self.window_function, ProcessWindowFunction)

    def _starts(self, ts: int) -> list[int]:
        last = ts - (ts - self.offset + self.slide) % self.slide
        return list(range(last, ts - self.size, -self.slide))

    def process_batch(self, values, timestamps):
        if timestamps is None:
            raise TypeError(
                f"'{self.ctx.operator_name}' uses event-time windows but its records carry no timestamps; "
                "assign them with a WatermarkStrategy and a timestamp assigner"
            )
        if self.size == self.slide and self.is_reduce:
            self._reduce_tumbling(values, timestamps)
        else:
            self._add_general(values, timestamps)
        self.collector.flush()

    def _reduce_tumbling(self, values: list[Any], timestamps: list[int]) -> None:
        """The common case, one window per record and a reduce, without the general loop's per-record branching."""
        ks, contents, keys_by_start, reduce_fn = self.key_selector, self.contents, self.keys_by_start, self.reduce_fn
        size, offset, wm = self.size, self.offset, self.watermark
        # A window [start, start + size) is late once start + size - 1 + lateness <= wm, and is
        # already fired (so fires again with each element) once start + size - 1 <= wm.
        late_upto = wm - self.lateness - size + 1
        fired_upto = wm - size + 1
        for v, ts in zip(values, timestamps):
            start = ts - (ts - offset) % size
            if start <= late_upto:
                self._late(v, ts)
                continue
            key = ks(v)
            wins = contents.get(key)
            if wins is None:
                contents[key] = {start: v}
                self._opened(key, start)
            else:
                acc = wins.get(start, _MISSING)
                if acc is _MISSING:
                    wins[start] = v
                    self._opened(key, start)
                else:
                    wins[start] = reduce_fn(acc, v)
            if start <= fired_upto:
                self._fire(key, start)  # late but within allowed lateness: fire with this element

    def _opened(self, key: Any, start: int) -> None:
        """Index a (key, window) that just got its first element."""
        holders = self.keys_by_start.get(start)
        if holders is None:
            self.keys_by_start[start] = {key}
            # A window first opened behind the watermark fires per element; it only needs its cleanup.
            behind = start + self.size - 1 <= self.watermark
            heapq.heappush(self.cleanup_heap if behind else self.fire_heap, start)
        else:
            holders.add(key)

    def _add_general(self, values: list[Any], timestamps: list[int]) -> None:
        ks, contents = self.key_selector, self.contents
        size, slide, offset, lateness, wm = self.size, self.slide, self.offset, self.lateness, self.watermark
        reduce_fn = self.reduce_fn if self.is_reduce else None
        agg = None if self.is_reduce else self.function
        tumbling = size == slide
        for v, ts in zip(values, timestamps):
            if tumbling:
                start = ts - (ts - offset + size) % size
                starts = (start,)
            else:
                starts = self._starts(ts)
            key = _MISSING
            for start in starts:
                end_ts = start + size - 1
                if end_ts + lateness <= wm:
                    continue
                if key is _MISSING:
                    key = ks(v)
                    wins = contents.get(key)
                    if wins is None:
                        wins = contents[key] = {}
                acc = wins.get(start, _MISSING)
                if acc is _MISSING:
                    wins[start] = v if reduce_fn else agg.add(v, agg.create_accumulator())
                    self._opened(key, start)
                else:
                    wins[start] = reduce_fn(acc, v) if reduce_fn else agg.add(v, acc)
                if end_ts <= wm:
                    self._fire(key, start)  # late but within allowed lateness: fire with this element
            if key is _MISSING:
                self._late(v, ts)

    def _late(self, v: Any, ts: int) -> None:
        if self.late_tag is not None:
            self.emit_side(self.late_tag, [v], [ts])
        else:
            self.ctx.metrics.late_records_dropped += 1

    def _fire(self, key: Any, start: int) -> None:
        acc = self.contents[key][start]
        result = acc if self.is_reduce else self.function.get_result(acc)
        out_ts = start + self.size - 1
        wf = self.window_function
        if wf is None:
            self.collector.add(result, out_ts)
            return
        window = TimeWindow(start, start + self.size)
        if isinstance(wf, ProcessWindowFunction):
            self.backend.current_key = key  # for global and per-window state
            self.wctx.w = window
            self.collector.add_result(wf.process(key, self.wctx, [result]), out_ts)
        elif isinstance(wf, WindowFunction):
            self.collector.add_result(wf.apply(key, window, [result]), out_ts)
        else:
            self.collector.add_result(wf(key, window, [result]), out_ts)

    def _fire_and_drop(self, start: int) -> None:
        """Fire one window start for every key and drop it at once: no lateness, no window function."""
        contents = self.contents
        results = []
        for key in self.keys_by_start.pop(start, ()):
            wins = contents[key]
            results.append(wins.pop(start))
            if not wins:
                del contents[key]
        if not self.is_reduce:
            results = [self.function.get_result(acc) for acc in results]
        self.collector.add_records(results, start + self.size - 1)

    def _drop(self, key: Any, start: int) -> None:
        wins = self.contents.get(key)
        if wins is not None:
            wins.pop(start, None)
            if not wins:
                del self.contents[key]
        if self.clears:  # the window is gone: ProcessWindowFunction.clear, then its per-window state
            window = TimeWindow(start, start + self.size)
            self.backend.current_key = key
            self.wctx.w = window
            self.window_function.clear(self.wctx)
            self.window_states.clear_namespace(key, window)

    def process_watermark(self, watermark: int) -> None:
        if watermark <= self.watermark:
            return
        self.watermark = watermark
        size, lateness = self.size, self.lateness
        while self.fire_heap and self.fire_heap[0] + size - 1 <= watermark:
            start = heapq.heappop(self.fire_heap)
            if lateness == 0 and self.window_function is None:
                self._fire_and_drop(start)
                continue
            holders = self.keys_by_start.get(start, ())
            for key in holders:
                self._fire(key, start)
            if lateness == 0:
                for key in holders:
                    self._drop(key, start)
                self.keys_by_start.pop(start, None)
            else:
                heapq.heappush(self.cleanup_heap, start)
        while self.cleanup_heap and self.cleanup_heap[0] + size - 1 + lateness <= watermark:
            start = heapq.heappop(self.cleanup_heap)
            for key in self.keys_by_start.pop(start, ()):
                self._drop(key, start)
        self.collector.flush()
        self.ctx.metrics.current_output_watermark = watermark
        self.output.emit_watermark(watermark)

    def close(self) -> None:
        super().close()
        if isinstance(self.window_function, Function):
            self.window_function.close()
