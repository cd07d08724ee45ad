"""The window operator: keyed windows with triggers, evictors, allowed lateness and late side output.

Per key it keeps ``{window: contents}`` in the keyed state backend. Contents
are an incremental accumulator (reduce/aggregate without evictor) or the
(value, timestamp) list (process/apply, or any function with an evictor).
Session windows merge as elements arrive, and their contents merge with them.
Timers are keyed by (key, window); one timer at the window's cleanup time
both fires event-time triggers and clears the window.
"""
from __future__ import annotations

import functools
from typing import Any

from millstream.engine.datastream.functions import (
    AggregateFunction,
    Function,
    ProcessWindowFunction,
    ReduceFunction,
    WindowFunction,
)
from millstream.engine.runtime.operators.base import StreamingRuntimeContext, StreamOperator
from millstream.engine.runtime.operators.results import ResultCollector
from millstream.engine.runtime.state_keys import StateKeys
from millstream.engine.runtime.state.namespaced import NamespacedStateStore
from millstream.engine.runtime.timers import InternalTimerService
from millstream.engine.windowing.assigners import WindowAssigner
from millstream.engine.windowing.trigger_state import merge_into, state_view
from millstream.engine.windowing.triggers import Trigger, TriggerResult
from millstream.engine.windowing.windows import MAX_TIMESTAMP


WINDOW_STATE_PREFIX = "_window_state/"


def _timer_key(timer_key: tuple[Any, Any]) -> Any:
    return timer_key[0]


class _TriggerContext(Trigger.OnMergeContext):
    """What a trigger may touch: bound to one (key, window) at a time. It answers to Millstream's names
    and to PyFlink's (``get_current_watermark``, ``get_partitioned_state``...) for triggers written for PyFlink."""

    def __init__(self, op: "WindowOperator") -> None:
        self.op = op
        self.key: Any = None
        self.window: Any = None
        self.merged_slots: list[dict[str, Any]] = []  # the merged windows' state, during on_merge only

    def current_watermark(self) -> int:
        return self.op.timers.current_watermark

    def current_processing_time(self) -> int:
        return self.op.ctx.clock()

    def register_event_time_timer(self, ts: int) -> None:
        self.op.timers.register_event_time_timer((self.key, self.window), ts)

    def delete_event_time_timer(self, ts: int) -> None:
        if ts != self.op.cleanup_time(self.window):  # the cleanup timer stays
            self.op.timers.delete_event_time_timer((self.key, self.window), ts)

    def register_processing_time_timer(self, ts: int) -> None:
        self.op.timers.register_processing_time_timer((self.key, self.window), ts)

    def delete_processing_time_timer(self, ts: int) -> None:
        self.op.timers.delete_processing_time_timer((self.key, self.window), ts)

    # -- PyFlink's TriggerContext ------------------------------------------------------
    def get_current_watermark(self) -> int:
        return self.current_watermark()

    def get_current_processing_time(self) -> int:
        return self.current_processing_time()

    def get_partitioned_state(self, state_descriptor: Any) -> Any:
        key, window = self.key, self.window  # the view stays bound to this key and window
        return state_view(
            state_descriptor,
            lambda name: self._slot_get(key, window, name),
            lambda name, value: self._slot_set(key, window, name, value),
        )

    def merge_partitioned_state(self, state_descriptor: Any) -> None:
        key, window = self.key, self.window
        merge_into(
            state_descriptor,
            self.merged_slots,
            lambda name: self._slot_get(key, window, name),
            lambda name, value: self._slot_set(key, window, name, value),
        )

    def _slot_get(self, key: Any, window: Any, name: str) -> Any:
        saved = self.key, self.window
        self.key, self.window = key, window
        try:
            return self.get_state(name)
        finally:
            self.key, self.window = saved

    def _slot_set(self, key: Any, window: Any, name: str, value: Any) -> None:
        saved = self.key, self.window
        self.key, self.window = key, window
        try:
            self.set_state(name, value)
        finally:
            self.key, self.window = saved

    def get_state(self, name: str) -> Any:
        windows = self.op.trigger_state.get(self.key)
        slot = windows.get(self.window) if windows else None
        return slot.get(name) if slot else None

    def set_state(self, name: str, value: Any) -> None:
        # key -> {window: {name: value}}: keyed by the key alone, so it moves with its key group.
        table = self.op.trigger_state
        windows = table.get(self.key)
        slot = windows.get(self.window) if windows else None
        if value is None:
            if slot:
                slot.pop(name, None)
                if not slot:
                    del windows[self.window]  # type: ignore[index]
                    if not windows:
                        del table[self.key]
        elif windows is None:
            table[self.key] = {self.window: {name: value}}
        elif slot is None:
            windows[self.window] = {name: value}
        else:
            slot[name] = value


class _WindowFunctionContext(ProcessWindowFunction.Context):
    def __init__(self, op: "WindowOperator") -> None:
        self.op = op
        self.w: Any = None

    def window(self) -> Any:
        return self.w

    def current_processing_time(self) -> int:
        return self.op.ctx.clock()

    def current_watermark(self) -> int:
        return self.op.timers.current_watermark

    def window_state(self) -> Any:
        """State of the current key and this window, dropped when the window is cleaned up."""
        if self.op.assigner.is_merging:
            # As in Flink: merged session windows would have to merge arbitrary user state.
            raise TypeError(
                f"'{self.op.ctx.operator_name}': per-window state is not allowed with merging (session) windows"
            )
        return self.op.window_states

    def global_state(self) -> Any:
        """State of the current key, shared by all its windows."""
        return self.op.global_states


class WindowOperator(StreamOperator):
    wants_ticks = True

    def timer_services(self) -> dict[str, Any]:
        return {"timers": self.timers}

    def restore_state(self, state: Any) -> None:
        if state and "timers" in state:  # a snapshot from before timers moved into keyed state
            self.timers.restore(state["timers"])

    def open(self) -> None:
        p = self.params
        self.assigner: WindowAssigner = p["assigner"]
        self.trigger: Trigger = p.get("trigger") or self.assigner.get_default_trigger()
        self.evictor = p.get("evictor")
        self.lateness: int = int(p.get("allowed_lateness", 0))
        self.late_tag: str | None = p.get("late_tag")
        self.kind: str = p["function_kind"]  # reduce | aggregate | process | apply
        self.window_function = p.get("window_function")
        if self.assigner.is_merging and not self.trigger.can_merge():
            raise TypeError(f"'{self.ctx.operator_name}': the trigger {type(self.trigger).__name__} cannot merge session windows")
        for f in (self.function, self.window_function):
            if isinstance(f, Function):
                f.open(StreamingRuntimeContext(self.ctx))
        assert self.ctx.keyed_backend is not None and self.ctx.key_selector is not None
        self.backend = self.ctx.keyed_backend
        self.key_selector = self.ctx.key_selector
        self.keys = StateKeys()  # stand-ins for keys Python cannot hash (a list)
        self.contents: dict[Any, dict[Any, Any]] = self.backend.table("_window_contents", "window")
        self.trigger_state: dict[Any, dict[Any, dict[str, Any]]] = self.backend.table("_window_triggers", "window")
        # Assigners that place an element by its per-key count (PyFlink's sliding count windows).
        self.element_counts: dict[Any, int] | None = (
            self.backend.table("_window_element_counts", "value") if getattr(self.assigner, "counts_elements", False) else None
        )
        # Timers are keyed by (key, window); they belong to the key's key group.
        self.timers = InternalTimerService(self.ctx.clock, key_of=_timer_key)
        self.tctx = _TriggerContext(self)
        self.wctx = _WindowFunctionContext(self)
        self.window_states = NamespacedStateStore(self.backend, WINDOW_STATE_PREFIX, lambda: self.wctx.w, self.ctx.operator_name)
        self.global_states = StreamingRuntimeContext(self.ctx)
        self.collector = ResultCollector(self)
        self.incremental = self.evictor is None and self.kind in ("reduce", "aggregate")
        f = self.function
        if self.kind == "reduce":
            self.reduce_fn = f.reduce if isinstance(f, ReduceFunction) else f
        if self.kind == "aggregate" and not isinstance(f, AggregateFunction):
            raise TypeError(f"'{self.ctx.operator_name}': aggregate() needs an AggregateFunction")

    # -- contents ----------------------------------------------------------------
    def _add(self, windows: dict[Any, Any], w: Any, v: Any, ts: int) -> None:
        if not self.incremental:
            windows.setdefault(w, []).append((v, ts))
        elif self.kind == "reduce":
            windows[w] = v if w not in windows else self.reduce_fn(windows[w], v)
        else:
            agg: AggregateFunction = self.function
            acc = windows[w] if w in windows else agg.create_accumulator()
            windows[w] = agg.add(v, acc)

    def _merge_contents(self, a: Any, b: Any) -> Any:
        if not self.incremental:
            return sorted(a + b, key=lambda p: p[1])
        if self.kind == "reduce":
            return self.reduce_fn(a, b)
        return self.function.merge(a, b)

    def cleanup_time(self, w: Any) -> int:
        if w.max_timestamp() == MAX_TIMESTAMP:
            return MAX_TIMESTAMP
        return w.max_timestamp() + (self.lateness if self.assigner.is_event_time else 0)

    def _is_late(self, w: Any) -> bool:
        return self.assigner.is_event_time and self.cleanup_time(w) <= self.timers.current_watermark

    def _bind(self, key: Any, w: Any) -> _TriggerContext:
        self.tctx.key, self.tctx.window = key, w
        return self.tctx

    # -- elements ------------------------------------------------------------------
    def process_batch(self, values, timestamps):
        ks, backend, assigner = self.key_selector, self.backend, self.assigner
        event_time = assigner.is_event_time
        for i, v in enumerate(values):
            ts = timestamps[i] if timestamps is not None else None
            if event_time and ts is None:
                raise TypeError(
                    f"'{self.ctx.operator_name}' uses event-time windows but its records carry no timestamps; "
                    "assign them with a WatermarkStrategy and a timestamp assigner"
                )
            elem_ts = ts if event_time else self.ctx.clock()
            key = ks(v)
            try:
                hash(key)
            except TypeError:
                key = self.keys.of(key)
            backend.current_key = key
            windows = self.contents.get(key)
            if windows is None:
                windows = self.contents[key] = {}
            counts = self.element_counts
            if counts is None:
                targets = assigner.assign_windows(v, elem_ts)
            else:
                n = counts.get(key, 0)
                counts[key] = n + 1
                targets = assigner.windows_for_count(n)
            if assigner.is_merging:
                targets = [self._merge_into(key, windows, w) for w in targets]
            placed = False
            for w in targets:
                if self._is_late(w):
                    continue
                placed = True
                # Keep the record's own timestamp (evictors read it); processing time only if it has none.
                self._add(windows, w, v, ts if ts is not None else elem_ts)
                result = self.trigger.on_element(v, elem_ts, w, self._bind(key, w))
                self._react(key, windows, w, result)
                if self.cleanup_time(w) != MAX_TIMESTAMP:
                    if event_time:
                        self.timers.register_event_time_timer((key, w), self.cleanup_time(w))
                    else:
                        self.timers.register_processing_time_timer((key, w), self.cleanup_time(w))
            if not windows:
                del self.contents[key]
            if not placed:
                self._late(v, ts)
        self.collector.flush()

    def _late(self, v: Any, ts: int | None) -> None:
        if self.late_tag is not None:
            self.emit_side(self.late_tag, [v], [ts] if ts is not None else None)
        else:
            self.ctx.metrics.count_late(self.ctx.operator_name)

    def _merge_into(self, key: Any, windows: dict[Any, Any], new: Any) -> Any:
        """Merge a new session window with the key's overlapping ones; return the result window."""
        merged = self.assigner.merge_windows([*windows.keys(), new])
        for cover, members in merged:
            if new not in members:
                continue
            olds = [m for m in members if m != cover and m in windows]
            acc = windows.pop(cover, None)
            counts = 0
            key_slots = self.trigger_state.get(key) or {}
            merged_slots = [dict(key_slots.get(m) or {}) for m in olds]  # before clear() drops them
            for m in olds:
                part = windows.pop(m)
                acc = part if acc is None else self._merge_contents(acc, part)
                tctx = self._bind(key, m)
                counts += tctx.get_state("count") or 0
                self.trigger.clear(m, tctx)
                self._drop_trigger_state(key, m)
                self.timers.delete_event_time_timer((key, m), self.cleanup_time(m))
                self.timers.delete_processing_time_timer((key, m), self.cleanup_time(m))
            if acc is not None:
                windows[cover] = acc
            if olds:
                tctx = self._bind(key, cover)
                if counts:
                    tctx.set_state("count", (tctx.get_state("count") or 0) + counts)
                tctx.merged_slots = merged_slots
                try:
                    self.trigger.on_merge(cover, tctx)
                finally:
                    tctx.merged_slots = []
            return cover
        return new

    def _react(self, key: Any, windows: dict[Any, Any], w: Any, result: TriggerResult) -> None:
        if result.is_fire and w in windows:
            self._emit(key, w, windows)
        if result.is_purge:
            windows.pop(w, None)

    # -- firing --------------------------------------------------------------------
    def _emit(self, key: Any, w: Any, windows: dict[Any, Any]) -> None:
        contents = windows[w]
        out_ts = w.max_timestamp()
        col = self.collector
        if self.incremental:
            result = contents if self.kind == "reduce" else self.function.get_result(contents)
            self._apply_window_function(key, w, [result], out_ts, direct=True)
            return
        elements = contents
        if self.evictor is not None and not self.evictor.do_evict_after:
            elements = self.evictor.evict(elements, w)
        values = [v for v, _ in elements]
        if self.kind == "reduce":
            if values:
                self._apply_window_function(key, w, [functools.reduce(self.reduce_fn, values)], out_ts, direct=True)
        elif self.kind == "aggregate":
            agg: AggregateFunction = self.function
            acc = agg.create_accumulator()
            for v in values:
                acc = agg.add(v, acc)
            self._apply_window_function(key, w, [agg.get_result(acc)], out_ts, direct=True)
        elif self.kind == "process":
            self.wctx.w = w
            col.add_result(self.function.process(self.keys.user_key(key), self.wctx, values), out_ts)
        else:
            wf: WindowFunction = self.function
            col.add_result(wf.apply(self.keys.user_key(key), w, values), out_ts)
        if self.evictor is not None:
            kept = self.evictor.evict(elements, w) if self.evictor.do_evict_after else elements
            windows[w] = list(kept)

    def _apply_window_function(self, key: Any, w: Any, results: list[Any], out_ts: int, direct: bool) -> None:
        wf = self.window_function
        if wf is None:
            self.collector.add_records(results, out_ts)
        elif isinstance(wf, ProcessWindowFunction):
            self.wctx.w = w
            self.collector.add_result(wf.process(self.keys.user_key(key), self.wctx, results), out_ts)
        elif isinstance(wf, WindowFunction):
            self.collector.add_result(wf.apply(self.keys.user_key(key), w, results), out_ts)
        else:
            self.collector.add_result(wf(self.keys.user_key(key), w, results), out_ts)

    def _on_timers(self, poll: Any, event_time: bool) -> None:
        # One timer at a time: a trigger may register another timer that is already due.
        while (timer := poll()) is not None:
            ts, (key, w) = timer
            self.backend.current_key = key
            windows = self.contents.get(key)
            if windows is not None and w in windows:
                tctx = self._bind(key, w)
                result = (
                    self.trigger.on_event_time(ts, w, tctx) if event_time else self.trigger.on_processing_time(ts, w, tctx)
                )
                self._react(key, windows, w, result)
            if ts == self.cleanup_time(w) and event_time == self.assigner.is_event_time:
                self._clear(key, w)
        self.collector.flush()

    def _drop_trigger_state(self, key: Any, w: Any) -> None:
        windows = self.trigger_state.get(key)
        if windows is not None and windows.pop(w, None) is not None and not windows:
            del self.trigger_state[key]

    def _clear(self, key: Any, w: Any) -> None:
        windows = self.contents.get(key)
        if windows is not None:
            windows.pop(w, None)
            if not windows:
                del self.contents[key]
        tctx = self._bind(key, w)
        self.trigger.clear(w, tctx)
        self._drop_trigger_state(key, w)
        if isinstance(self.window_function or self.function, ProcessWindowFunction):
            self.wctx.w = w
            (self.window_function or self.function).clear(self.wctx)
            # Whatever per-window state clear() left behind is unreachable now: drop it too.
            self.window_states.clear_namespace(key, w)

    def process_watermark(self, watermark: int) -> None:
        self.timers.set_watermark(watermark)
        self._on_timers(self.timers.poll_event_timer, True)
        self.ctx.metrics.current_output_watermark = watermark
        self.output.emit_watermark(watermark)

    def on_tick(self, now_ms: int) -> None:
        now = self.ctx.clock()
        self._on_timers(lambda: self.timers.poll_processing_timer(now), False)

    def close(self) -> None:
        super().close()
        if isinstance(self.window_function, Function):
            self.window_function.close()

    def stop_without_drain(self) -> None:
        pass  # open windows stay in the savepoint and fire after the job resumes from it

    def end_input(self) -> None:
        # Bounded input: processing-time windows still open fire now instead of being lost.
        if not self.assigner.is_event_time:
            self._on_timers(lambda: self.timers.poll_processing_timer(MAX_TIMESTAMP), False)
