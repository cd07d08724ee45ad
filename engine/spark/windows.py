"""Keyed windows on Spark in BATCH: which ones translate, and their per-partition logic.

The window math is the engine's own (``millstream.engine.windowing``): assigners place
records, merging assigners merge sessions, and count triggers and evictors
run unchanged. Three shapes, chosen by ``plan_window``:

- ``by_window``: tumbling, sliding and other non-merging event-time windows
  group by (key, window), with map-side combining for reduce and for an
  aggregate whose AggregateFunction has merge();
- ``merging``: session windows take each key's records sorted by timestamp,
  then assign and merge them;
- ``count``: count windows run their trigger and evictor over each key's
  records in input order.

In BATCH all data is on time (Flink's batch semantics): every window fires
once, at the end of input, so allowed lateness and late side outputs have
nothing to do. The output timestamp is the window's ``max_timestamp()``, as
natively. Nothing here imports PySpark.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from millstream.engine.datastream.functions import (
    AggregateFunction,
    Function,
    ProcessWindowFunction,
    ReduceFunction,
    WindowFunction,
)
from millstream.engine.runtime.watermarks import MAX_WATERMARK, MIN_WATERMARK
from millstream.engine.spark.partitions import (
    KeyPartitioner,
    PartitionFn,
    SortedKeyedRecord,
    TaskInfo,
    _close,
    _open,
    _results,
    current_partition,
    records_by_key,
)
from millstream.engine.datastream.windowed_stream import describe_window
from millstream.engine.spark.validation import BY_WINDOW, COUNT, MERGING, window_shape  # noqa: F401 (shapes used as W.*)
from millstream.engine.windowing.assigners import WindowAssigner
from millstream.engine.windowing.evictors import Evictor
from millstream.engine.windowing.triggers import Trigger



@dataclass(frozen=True)
class WindowPlan:
    shape: str  # BY_WINDOW | MERGING | COUNT
    incremental: bool  # reduce/aggregate without an evictor: an accumulator, not the records


def plan_window(operator_name: str, params: dict[str, Any]) -> WindowPlan:
    """How a WINDOW operator runs on Spark; raises UntranslatableJob naming what has no translation.

    The submitted JobGraph was judged by the same rule; this judges the real
    objects, which the user code carries.
    """
    evictor: Evictor | None = params.get("evictor")
    kind = params["function_kind"]
    window = describe_window(params["assigner"], params.get("trigger"), evictor, kind)
    shape = window_shape(operator_name, window)
    return WindowPlan(shape, incremental=evictor is None and kind in ("reduce", "aggregate"))


def _missing_timestamp(operator_name: str) -> TypeError:
    return TypeError(
        f"'{operator_name}' uses event-time windows but its records carry no timestamps; "
        "assign them with a WatermarkStrategy and a timestamp assigner"
    )


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class _WindowContext(ProcessWindowFunction.Context):
    """A ProcessWindowFunction's view: windows fire at the end of input, so the watermark is at its maximum."""

    def __init__(self) -> None:
        self.w: Any = None

    def window(self) -> Any:
        return self.w

    def current_processing_time(self) -> int:
        return _wall_clock_ms()

    def current_watermark(self) -> int:
        return MAX_WATERMARK

    def window_state(self) -> Any:
        raise NotImplementedError("per-window state in a ProcessWindowFunction is not available yet")

    def global_state(self) -> Any:
        raise NotImplementedError("global state in a ProcessWindowFunction is not available yet")


class WindowFunctions:
    """A window's user functions in one Spark task: combining, firing and the window function.

    Combiners run inside Spark's shuffle, which has no start-of-task hook, so
    the functions open on first use in each task; ``close`` runs where a
    partition function ends (never after a map-side combine).
    """

    def __init__(self, params: dict[str, Any], function: Any, info: TaskInfo) -> None:
        self.kind: str = params["function_kind"]
        self.function = function
        self.window_function = params.get("window_function")
        self.info = info
        self.opened = False
        self.ctx = _WindowContext()
        if self.kind == "aggregate" and not isinstance(function, AggregateFunction):
            raise TypeError(f"'{info.operator_name}': aggregate() needs an AggregateFunction")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "opened": False}  # every task opens its own copy

    def open(self, index: int | None = None) -> None:
        if self.opened:
            return
        self.opened = True
        index = current_partition() if index is None else index
        for f in (self.function, self.window_function):
            if isinstance(f, Function):
                _open(f, self.info, index)

    def close(self) -> None:
        if self.opened:
            self.opened = False
            for f in (self.function, self.window_function):
                _close(f)

    # -- incremental contents (combineByKey) ------------------------------------
    def can_merge(self) -> bool:
        """Can partial accumulators merge? AggregateFunction.merge is optional (natively only sessions need it)."""
        return self.kind == "reduce" or type(self.function).merge is not AggregateFunction.merge

    def _reduce(self, a: Any, b: Any) -> Any:
        f = self.function
        return f.reduce(a, b) if isinstance(f, ReduceFunction) else f(a, b)

    def create(self, value: Any) -> Any:
        self.open()
        if self.kind == "reduce":
            return value
        return self.function.add(value, self.function.create_accumulator())

    def add(self, acc: Any, value: Any) -> Any:
        self.open()
        return self._reduce(acc, value) if self.kind == "reduce" else self.function.add(value, acc)

    def merge(self, a: Any, b: Any) -> Any:
        self.open()
        return self._reduce(a, b) if self.kind == "reduce" else self.function.merge(a, b)

    # -- firing --------------------------------------------------------------------
    def fire_accumulator(self, key: Any, window: Any, acc: Any) -> list[Any]:
        result = acc if self.kind == "reduce" else self.function.get_result(acc)
        return self._window_function(key, window, [result])

    def fire_values(self, key: Any, window: Any, values: list[Any]) -> list[Any]:
        """The window's function over its records, as the native operator fires non-incremental contents."""
        if self.kind == "reduce":
            return self._window_function(key, window, [functools.reduce(self._reduce, values)]) if values else []
        if self.kind == "aggregate":
            agg: AggregateFunction = self.function
            acc = agg.create_accumulator()
            for v in values:
                acc = agg.add(v, acc)
            return self._window_function(key, window, [agg.get_result(acc)])
        if self.kind == "process":
            self.ctx.w = window
            return _results(self.function.process(key, self.ctx, values))
        return _results(self.function.apply(key, window, values))

    def _window_function(self, key: Any, window: Any, results: list[Any]) -> list[Any]:
        wf = self.window_function
        if wf is None:
            return results
        if isinstance(wf, ProcessWindowFunction):
            self.ctx.w = window
            return _results(wf.process(key, self.ctx, results))
        if isinstance(wf, WindowFunction):
            return _results(wf.apply(key, window, results))
        return _results(wf(key, window, results))

    def clear(self, window: Any) -> None:
        """A time window is gone once fired (BATCH has no lateness): ProcessWindowFunction.clear, as natively."""
        f = self.window_function or self.function
        if isinstance(f, ProcessWindowFunction):
            self.ctx.w = window
            f.clear(self.ctx)


def _out(results: list[Any], window: Any, stamped: bool) -> list[Any]:
    if not stamped:
        return results
    ts = window.max_timestamp()
    return [(r, ts) for r in results]


# -- by (key, window): non-merging event-time windows --------------------------------
class WindowKeyPartitioner(KeyPartitioner):
    """(key, window) -> the instance owning the key's key group, as the native HASH edge routes the key."""

    def __call__(self, key_and_window: tuple[Any, Any]) -> int:  # type: ignore[override]
        return super().__call__(key_and_window[0])


def assign_windows_partition(
    key_selector: Callable[[Any], Any], assigner: WindowAssigner, operator_name: str, combine: bool
) -> PartitionFn:
    """(value, timestamp) -> ((key, window), value) per window of the record to ``combine``;
    else ((key, window), (timestamp, partition, position, value)), so a window's records can be put in order."""

    def run(index: int, it: Iterator[tuple[Any, int | None]]) -> Iterator[Any]:
        for position, (v, ts) in enumerate(it):
            if ts is None:
                raise _missing_timestamp(operator_name)
            k = key_selector(v)
            for w in assigner.assign_windows(v, ts):
                yield ((k, w), v) if combine else ((k, w), (ts, index, position, v))

    return run


def fire_accumulators_partition(fns: WindowFunctions, stamped: bool) -> PartitionFn:
    """((key, window), accumulator) after ``combineByKey`` -> the window's output."""

    def run(index: int, it: Iterator[tuple[tuple[Any, Any], Any]]) -> Iterator[Any]:
        fns.open(index)
        try:
            for (k, w), acc in it:
                out = fns.fire_accumulator(k, w, acc)
                fns.clear(w)
                yield from _out(out, w, stamped)
        finally:
            fns.close()

    return run


def fire_groups_partition(fns: WindowFunctions, stamped: bool) -> PartitionFn:
    """((key, window), records) after ``groupByKey`` -> the output, records in Flink's BATCH order."""

    def order(record: tuple[int, int, int, Any]) -> tuple[int, int, int]:
        return record[0], record[1], record[2]  # timestamp, then input order

    def run(index: int, it: Iterator[tuple[tuple[Any, Any], Iterable[Any]]]) -> Iterator[Any]:
        fns.open(index)
        try:
            for (k, w), records in it:
                values = [r[3] for r in sorted(records, key=order)]
                out = fns.fire_values(k, w, values)
                fns.clear(w)
                yield from _out(out, w, stamped)
        finally:
            fns.close()

    return run


# -- merging (session) windows ------------------------------------------------------------
def merging_windows_partition(
    fns: WindowFunctions, assigner: WindowAssigner, operator_name: str, stamped: bool
) -> PartitionFn:
    """Each key's records sorted by timestamp: assign, merge with the assigner, fire every merged window."""

    def run(index: int, it: Iterator[SortedKeyedRecord]) -> Iterator[Any]:
        fns.open(index)
        try:
            for k, records in records_by_key(it):
                placed: list[tuple[Any, Any]] = []
                for v, ts in records:
                    if ts is None:
                        raise _missing_timestamp(operator_name)
                    placed.extend((v, w) for w in assigner.assign_windows(v, ts))
                merged = assigner.merge_windows(list(dict.fromkeys(w for _, w in placed)))
                cover_of = {m: cover for cover, members in merged for m in members}
                contents: dict[Any, list[Any]] = {}
                for v, w in placed:
                    contents.setdefault(cover_of[w], []).append(v)
                for w, values in contents.items():
                    out = fns.fire_values(k, w, values)
                    fns.clear(w)
                    yield from _out(out, w, stamped)
        finally:
            fns.close()

    return run


# -- count windows -------------------------------------------------------------------------
class _KeyTriggerContext:
    """A count trigger's view of one key's global window: its small state, and a clock it never needs."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}

    def current_watermark(self) -> int:
        return MIN_WATERMARK  # records are being processed: the watermark rises only at the end

    def current_processing_time(self) -> int:
        return _wall_clock_ms()

    def _no_timers(self, ts: int) -> None:
        raise NotImplementedError("count windows on Spark run count triggers only; they set no timers")

    register_event_time_timer = delete_event_time_timer = _no_timers
    register_processing_time_timer = delete_processing_time_timer = _no_timers

    def get_state(self, name: str) -> Any:
        return self.state.get(name)

    def set_state(self, name: str, value: Any) -> None:
        if value is None:
            self.state.pop(name, None)
        else:
            self.state[name] = value


def count_windows_partition(
    fns: WindowFunctions, params: dict[str, Any], incremental: bool, stamped: bool
) -> PartitionFn:
    """Each key's records in input order through the window's count trigger and evictor, as natively."""
    assigner: WindowAssigner = params["assigner"]
    trigger: Trigger = params.get("trigger") or assigner.get_default_trigger()
    evictor: Evictor | None = params.get("evictor")
    _empty = object()

    counting = getattr(assigner, "counts_elements", False)

    def run(index: int, it: Iterator[SortedKeyedRecord]) -> Iterator[Any]:
        fns.open(index)
        try:
            for k, records in records_by_key(it):
                # window -> [trigger context, accumulator, elements]; one GlobalWindow unless the
                # assigner places elements by their count (PyFlink's sliding count windows).
                open_windows: dict[Any, list[Any]] = {}
                for n, (v, _) in enumerate(records):
                    ts = _wall_clock_ms()  # count windows are not in event time: natively the clock stamps them
                    targets = assigner.windows_for_count(n) if counting else assigner.assign_windows(v, ts)
                    for w in targets:
                        slot = open_windows.get(w)
                        if slot is None:
                            slot = open_windows[w] = [_KeyTriggerContext(), _empty, []]
                        tctx, acc, elements = slot
                        if incremental:
                            acc = slot[1] = fns.create(v) if acc is _empty else fns.add(acc, v)
                        else:
                            elements.append((v, ts))
                        result = trigger.on_element(v, ts, w, tctx)
                        if result.is_fire and (acc is not _empty or elements):
                            if incremental:
                                yield from _out(fns.fire_accumulator(k, w, acc), w, stamped)
                            else:
                                kept = elements
                                if evictor is not None and not evictor.do_evict_after:
                                    kept = evictor.evict(kept, w)
                                yield from _out(fns.fire_values(k, w, [e for e, _ in kept]), w, stamped)
                                if evictor is not None:
                                    slot[2] = list(evictor.evict(kept, w) if evictor.do_evict_after else kept)
                        if result.is_purge:
                            if counting:  # that window gets no more elements
                                del open_windows[w]
                            else:
                                slot[1], slot[2] = _empty, []
        finally:
            fns.close()

    return run
