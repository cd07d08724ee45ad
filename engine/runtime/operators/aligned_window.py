"""Aligned event-time windows: the fast path for tumbling and sliding windows.

Used instead of the general WindowOperator when the trigger is the default
event-time trigger, there is no evictor and the function is incremental
(reduce or aggregate). Aligned windows start at the same instants for every
key, so one timer per window start replaces one timer per (key, window), and
windows are plain integers until they fire. Results match the general operator.

On the heap backend the accumulators are held by window start, ``start -> {key:
accumulator}``: the records of a batch mostly fall into one or two windows, so a
record costs one dict lookup, and firing a window start takes its whole dict.
Checkpoints write them as the keyed table ``_aligned_windows`` (``key -> {start:
accumulator}``), by key group, which is also where ``aligned_window_table.py``
keeps them for backends that hold state off the heap; so savepoints move freely
between the two, across state backends and parallelisms.
"""
from __future__ import annotations

import heapq
from typing import Any

from millstream.engine.datastream.functions import AggregateFunction, Function, ProcessWindowFunction, ReduceFunction, WindowFunction
from millstream.engine.runtime.operators.base import StreamingRuntimeContext, StreamOperator
from millstream.engine.runtime.operators.results import ResultCollector
from millstream.engine.runtime.state_keys import StateKeys
from millstream.engine.runtime.operators.window import WINDOW_STATE_PREFIX
from millstream.engine.runtime.state.namespaced import NamespacedStateStore
from millstream.engine.runtime.watermarks import MIN_WATERMARK
from millstream.engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from millstream.engine.windowing.triggers import EventTimeTrigger
from millstream.engine.windowing.windows import TimeWindow

_MISSING = object()
WINDOWS_TABLE = "_aligned_windows"


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
        self.keys = StateKeys()  # stand-ins for keys Python cannot hash (a list)
        # key -> {window start: accumulator}: the checkpointed form (and a restore's input)
        self.contents: dict[Any, dict[int, Any]] = self.backend.table(WINDOWS_TABLE, "window")
        self.windows: dict[int, dict[Any, Any]] = {}  # window start -> {key: accumulator}
        self.fire_heap: list[int] = []  # window starts not yet fired
        self.cleanup_heap: list[int] = []  # fired starts kept for allowed lateness
        self.watermark = MIN_WATERMARK
        self.collector = ResultCollector(self)
        self.wctx = _Context(self)
        self.window_states = NamespacedStateStore(self.backend, WINDOW_STATE_PREFIX, lambda: self.wctx.w, self.ctx.operator_name)
        self.global_states = StreamingRuntimeContext(self.ctx)
        self.clears = isinstance(self.window_function, ProcessWindowFunction)

    # -- checkpoints -------------------------------------------------------------
    def snapshot_state(self) -> Any:
        return {"watermark": self.watermark}

    def restore_state(self, state: Any) -> None:
        if state:
            self.watermark = state["watermark"]
        for key, wins in self.contents.items():
            for start, acc in wins.items():
                self._window(start)[key] = acc
        self.contents.clear()

    def keyed_tables(self) -> dict[str, tuple[str, Any]]:
        by_key: dict[Any, dict[int, Any]] = {}
        for start, accs in self.windows.items():
            for key, acc in accs.items():
                wins = by_key.get(key)
                if wins is None:
                    by_key[key] = {start: acc}
                else:
                    wins[start] = acc
        return {WINDOWS_TABLE: ("window", by_key.items())}

    # -- records ---------------------------------------------------------------
    def process_batch(self, values, timestamps):
        if timestamps is None:
            raise TypeError(
                f"'{self.ctx.operator_name}' uses event-time windows but its records carry no timestamps; "
                "assign them with a WatermarkStrategy and a timestamp assigner"
            )
        if self.size == self.slide and self.is_reduce:
            self._reduce_tumbling(values, timestamps)
        else:
            self._add(values, timestamps)
        self.collector.flush()

    def _starts(self, ts: int) -> list[int]:
        last = ts - (ts - self.offset) % self.slide
        return list(range(last, ts - self.size, -self.slide))

    def _window(self, start: int) -> dict[Any, Any]:
        """The accumulators of window ``start``, opened (and scheduled) if it is new."""
        accs = self.windows.get(start)
        if accs is None:
            accs = self.windows[start] = {}
            # A window first opened behind the watermark fires per element; it only needs its cleanup.
            behind = start + self.size - 1 <= self.watermark
            heapq.heappush(self.cleanup_heap if behind else self.fire_heap, start)
        return accs

    def _reduce_tumbling(self, values: list[Any], timestamps: list[int]) -> None:
        """The common case, one window per record and a reduce: a record costs one dict lookup."""
        ks, reduce_fn, size, offset, wm = self.key_selector, self.reduce_fn, self.size, self.offset, self.watermark
        # Window [start, start + size) is late once start + size - 1 + lateness <= wm, and already
        # fired (so it fires again with each element) once start + size - 1 <= wm.
        late_upto = wm - self.lateness - size + 1
        fired_upto = wm - size + 1
        current, accs = None, {}
        for v, ts in zip(values, timestamps):
            start = ts - (ts - offset) % size
            if start <= late_upto:
                self._late(v, ts)
                continue
            if start != current:
                current, accs = start, self._window(start)
            key = ks(v)
            try:
                hash(key)
            except TypeError:
                key = self.keys.of(key)
            acc = accs.get(key, _MISSING)
            accs[key] = v if acc is _MISSING else reduce_fn(acc, v)
            if start <= fired_upto:
                self._fire(key, start)  # late but within allowed lateness: fire with this element

    def _add(self, values: list[Any], timestamps: list[int]) -> None:
        """Sliding windows, or an aggregate."""
        ks, size, slide, offset, wm = self.key_selector, self.size, self.slide, self.offset, self.watermark
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
                    try:
                        hash(key)
                    except TypeError:
                        key = self.keys.of(key)
                accs, slot = self._slot(key, start)
                acc = accs.get(slot, _MISSING)
                if acc is _MISSING:
                    accs[slot] = v if reduce_fn else agg.add(v, agg.create_accumulator())
                    self._opened(key, start)
                else:
                    accs[slot] = reduce_fn(acc, v) if reduce_fn else agg.add(v, acc)
                if start <= fired_upto:
                    self._fire(key, start)
            if key is _MISSING:
                self._late(v, ts)

    def _slot(self, key: Any, start: int) -> tuple[dict[Any, Any], Any]:
        """Where the accumulator of (key, window start) lives: a dict and its key in that dict."""
        return self._window(start), key

    def _opened(self, key: Any, start: int) -> None:
        """(key, window start) got its first element (the heap layout has nothing more to record)."""

    def _late(self, v: Any, ts: int) -> None:
        if self.late_tag is not None:
            self.emit_side(self.late_tag, [v], [ts])
        else:
            self.ctx.metrics.count_late(self.ctx.operator_name)

    # -- firing ----------------------------------------------------------------
    def _fire(self, key: Any, start: int) -> None:
        self._emit(key, start, self.windows[start][key])

    def _fire_start(self, start: int) -> None:
        """Fire window ``start`` for every key that has it."""
        accs = self.windows.get(start)
        if not accs:
            return
        if self.window_function is None:
            results = list(accs.values())
            if not self.is_reduce:
                results = [self.function.get_result(acc) for acc in results]
            self.collector.add_records(results, start + self.size - 1)
            return
        for key, acc in accs.items():
            self._emit(key, start, acc)

    def _drop_start(self, start: int) -> None:
        accs = self.windows.pop(start, None)
        if accs and self.clears:
            for key in accs:
                self._clear(key, start)

    def _emit(self, key: Any, start: int, acc: Any) -> None:
        """One window's result for one key, through the window function if there is one."""
        result = acc if self.is_reduce else self.function.get_result(acc)
        out_ts = start + self.size - 1
        wf = self.window_function
        if wf is None:
            self.collector.add_records([result], out_ts)
            return
        window = TimeWindow(start, start + self.size)
        if isinstance(wf, ProcessWindowFunction):
            self.backend.current_key = key  # for global and per-window state
            self.wctx.w = window
            self.collector.add_result(wf.process(self.keys.user_key(key), self.wctx, [result]), out_ts)
        elif isinstance(wf, WindowFunction):
            self.collector.add_result(wf.apply(self.keys.user_key(key), window, [result]), out_ts)
        else:
            self.collector.add_result(wf(self.keys.user_key(key), window, [result]), out_ts)

    def _clear(self, key: Any, start: int) -> None:
        """The window is gone: ProcessWindowFunction.clear, then its per-window state."""
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
            self._fire_start(start)
            if lateness == 0:
                self._drop_start(start)
            else:
                heapq.heappush(self.cleanup_heap, start)
        while self.cleanup_heap and self.cleanup_heap[0] + size - 1 + lateness <= watermark:
            self._drop_start(heapq.heappop(self.cleanup_heap))
        self.collector.flush()
        self.ctx.metrics.current_output_watermark = watermark
        self.output.emit_watermark(watermark)

    def close(self) -> None:
        super().close()
        if isinstance(self.window_function, Function):
            self.window_function.close()
