"""Stateless one-input operators: map, flat_map, filter and process."""
from __future__ import annotations

from typing import Any

from engine.datastream.functions import (
    FilterFunction,
    FlatMapFunction,
    MapFunction,
    ProcessFunction,
    TimerService,
)
from engine.runtime.operators.base import StreamOperator


class MapOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        f = self.function
        self.fn = f.map if isinstance(f, MapFunction) else f

    def process_batch(self, values, timestamps):
        fn = self.fn
        self.output.emit([fn(v) for v in values], timestamps)


class FilterOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        f = self.function
        self.fn = f.filter if isinstance(f, FilterFunction) else f

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
        self.fn = f.flat_map if isinstance(f, FlatMapFunction) else f

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

    def current_processing_time(self) -> int:
        import time

        return int(time.time() * 1000)

    def current_watermark(self) -> int:
        return -(2**63)

    def _refuse(self, *_: Any) -> None:
        raise TypeError("timers can only be used on a keyed stream (key_by(...).process(...))")

    register_processing_time_timer = _refuse  # type: ignore[assignment]
    register_event_time_timer = _refuse  # type: ignore[assignment]
    delete_processing_time_timer = _refuse  # type: ignore[assignment]
    delete_event_time_timer = _refuse  # type: ignore[assignment]


class _ProcessContext(ProcessFunction.Context):
    def __init__(self) -> None:
        self.ts: int | None = None
        self.timers = _NoTimers()

    def timestamp(self) -> int | None:
        return self.ts

    def timer_service(self) -> TimerService:
        return self.timers


class ProcessOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        self.pctx = _ProcessContext()

    def process_batch(self, values, timestamps):
        fn: ProcessFunction = self.function
        ctx = self.pctx
        out: list[Any] = []
        ts_out: list[int] | None = None if timestamps is None else []
        for i, v in enumerate(values):
            ctx.ts = None if timestamps is None else timestamps[i]
            n = _extend(out, fn.process_element(v, ctx))
            if ts_out is not None:
                ts_out.extend([ctx.ts] * n)  # type: ignore[list-item]
        if out:
            self.output.emit(out, ts_out)

