"""Keyed operators: reduce (and the sum/min/max aggregations) and KeyedProcessFunction.

The key of each record is computed with the key selector of the HASH edge
that feeds the operator, and becomes the state backend's current key.
"""
from __future__ import annotations

from typing import Any

from engine.datastream.functions import KeyedProcessFunction, ReduceFunction, TimerService
from engine.runtime.operators.base import StreamOperator
from engine.runtime.operators.basic import _extend

_MISSING = object()


class ReduceOperator(StreamOperator):
    """Rolling reduce. In BATCH mode only the final value per key is emitted, at end of input."""

    def open(self) -> None:
        super().open()
        f = self.function
        self.fn = f.reduce if isinstance(f, ReduceFunction) else f
        assert self.ctx.keyed_backend is not None and self.ctx.key_selector is not None
        self.values = self.ctx.keyed_backend.table("_reduce", "value")
        self.key_selector = self.ctx.key_selector
        self.emit_updates = not self.ctx.is_batch

    def process_batch(self, values, timestamps):
        fn, ks, table, missing = self.fn, self.key_selector, self.values, _MISSING
        out: list[Any] = []
        append = out.append
        for v in values:
            k = ks(v)
            cur = table.get(k, missing)
            nv = v if cur is missing else fn(cur, v)
            table[k] = nv
            append(nv)
        if self.emit_updates:
            self.output.emit(out, timestamps)

    def end_input(self) -> None:
        if not self.emit_updates and self.values:
            self.output.emit(list(self.values.values()), None)


class _UnsupportedTimers(TimerService):
    def current_processing_time(self) -> int:
        import time

        return int(time.time() * 1000)

    def current_watermark(self) -> int:
        return -(2**63)

    def _refuse(self, *_: Any) -> None:
        raise NotImplementedError("timers are not available in this version of Millstream yet")

    register_processing_time_timer = _refuse  # type: ignore[assignment]
    register_event_time_timer = _refuse  # type: ignore[assignment]
    delete_processing_time_timer = _refuse  # type: ignore[assignment]
    delete_event_time_timer = _refuse  # type: ignore[assignment]


class _KeyedContext(KeyedProcessFunction.Context):
    def __init__(self, op: "KeyedProcessOperator") -> None:
        self.op = op
        self.ts: int | None = None
        self.timers = _UnsupportedTimers()

    def timestamp(self) -> int | None:
        return self.ts

    def timer_service(self) -> TimerService:
        return self.timers

    def get_current_key(self) -> Any:
        return self.op.backend.current_key


class KeyedProcessOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        assert self.ctx.keyed_backend is not None and self.ctx.key_selector is not None
        self.backend = self.ctx.keyed_backend
        self.key_selector = self.ctx.key_selector
        self.kctx = _KeyedContext(self)

    def process_batch(self, values, timestamps):
        fn: KeyedProcessFunction = self.function
        ks, backend, ctx = self.key_selector, self.backend, self.kctx
        out: list[Any] = []
        ts_out: list[int] | None = None if timestamps is None else []
        for i, v in enumerate(values):
            backend.current_key = ks(v)
            ctx.ts = None if timestamps is None else timestamps[i]
            n = _extend(out, fn.process_element(v, ctx))
            if ts_out is not None:
                ts_out.extend([ctx.ts] * n)  # type: ignore[list-item]
        if out:
            self.output.emit(out, ts_out)
