"""One-input operators: map, flat_map, filter and process.

On a keyed input, a rich function's keyed state is scoped to each record's key (KeyedStream runs
rich map/flat_map/filter functions as keyed process functions, as PyFlink does).
"""
from __future__ import annotations

from typing import Any, Callable

from millstream.engine.datastream.functions import (
    FilterFunction,
    FlatMapFunction,
    MapFunction,
    ProcessFunction,
    TimerService,
)
from millstream.engine.datastream.keyed_functions import may_use_keyed_state
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.runtime.operators.base import StreamOperator
from millstream.engine.runtime.operators.results import ResultCollector
from millstream.engine.runtime.state_keys import StateKeys
from millstream.engine.runtime.watermarks import NO_TIMESTAMP


def keyed_call(op: StreamOperator, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn``, or on a keyed input a wrapper that first makes the record's key the backend's
    current key, so the function's keyed state is the state of that key (as in Flink). KeyedStream
    runs rich functions as keyed process functions anyway; this covers any other keyed input."""
    backend, selector = op.ctx.keyed_backend, op.ctx.key_selector
    if backend is None or selector is None or not may_use_keyed_state(op.function):
        return fn

    keys = StateKeys()  # stand-ins for keys Python cannot hash (a list)

    def call(value: Any) -> Any:
        k = selector(value)
        try:
            hash(k)
        except TypeError:
            k = keys.of(k)
        backend.current_key = k
        return fn(value)

    return call


class MapOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        f = self.function
        self.fn = keyed_call(self, f.map if isinstance(f, MapFunction) else f)

    def process_batch(self, values, timestamps):
        fn = self.fn
        self.output.emit([fn(v) for v in values], timestamps)


class FilterOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        f = self.function
        self.fn = keyed_call(self, f.filter if isinstance(f, FilterFunction) else f)

    def process_batch(self, values, timestamps):
        fn = self.fn
        if timestamps is None:
            out = [v for v in values if fn(v)]
            if out:
                self.output.emit(out, None)
            return
        keep = [(v, t) for v, t in zip(values, timestamps) if fn(v)]
        if keep:
            self.output.emit([v for v, _ in keep], [t for _, t in keep])


def _extend(out: list[Any], result: Any) -> int:
    """Append a user function's result (an iterable, a generator, or None); return the count."""
    if result is None:
        return 0
    if isinstance(result, (str, bytes)):
        raise TypeError("a flat_map/process function must return an iterable of records, not a string")
    before = len(out)
    out.extend(result)
    return len(out) - before


class FlatMapOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        f = self.function
        self.fn = keyed_call(self, f.flat_map if isinstance(f, FlatMapFunction) else f)

    def process_batch(self, values, timestamps):
        fn = self.fn
        out: list[Any] = []
        if timestamps is None:
            for v in values:
                _extend(out, fn(v))
            if out:
                self.output.emit(out, None)
            return
        ts_out: list[int] = []
        for v, t in zip(values, timestamps):
            n = _extend(out, fn(v))
            ts_out.extend([t] * n)
        if out:
            self.output.emit(out, ts_out)


class _NoTimers(TimerService):
    """Timers on a non-keyed stream are refused, as in Flink."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.watermark = -(2**63)

    def current_processing_time(self) -> int:
        return self.clock()

    def current_watermark(self) -> int:
        return self.watermark

    def _refuse(self, *_: Any) -> None:
        raise TypeError("timers can only be used on a keyed stream (key_by(...).process(...))")

    register_processing_time_timer = _refuse  # type: ignore[assignment]
    register_event_time_timer = _refuse  # type: ignore[assignment]
    delete_processing_time_timer = _refuse  # type: ignore[assignment]
    delete_event_time_timer = _refuse  # type: ignore[assignment]


class _ProcessContext(ProcessFunction.Context):
    def __init__(self, timers: _NoTimers, collector: ResultCollector) -> None:
        self.ts: int | None = None
        self.timers = timers
        self.collector = collector

    def timestamp(self) -> int:
        # PyFlink hands Python functions StreamRecord.getTimestamp(): Long.MIN_VALUE without one.
        return NO_TIMESTAMP if self.ts is None else self.ts

    def timer_service(self) -> TimerService:
        return self.timers

    def output(self, output_tag: OutputTag, value: Any) -> None:
        self.collector.add_side(output_tag, value, self.ts)


class ProcessOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        self.collector = ResultCollector(self)
        self.timers = _NoTimers(self.ctx.clock)
        self.pctx = _ProcessContext(self.timers, self.collector)

    def process_batch(self, values, timestamps):
        fn: ProcessFunction = self.function
        ctx, col = self.pctx, self.collector
        for i, v in enumerate(values):
            ctx.ts = None if timestamps is None else timestamps[i]
            col.add_result(fn.process_element(v, ctx), ctx.ts)
        col.flush()

    def process_watermark(self, watermark: int) -> None:
        self.timers.watermark = watermark
        super().process_watermark(watermark)
