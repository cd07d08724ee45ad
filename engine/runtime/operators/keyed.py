"""Keyed operators: reduce (and the sum/min/max aggregations) and KeyedProcessFunction.

The key of each record is computed with the key selector of the HASH edge
that feeds the operator, and becomes the state backend's current key (for a
reduce, only when its function can hold keyed state of its own).
"""
from __future__ import annotations

from typing import Any

from millstream.engine.datastream.functions import KeyedProcessFunction, ReduceFunction, TimeDomain, TimerService
from millstream.engine.datastream.keyed_functions import may_use_keyed_state
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.runtime.operators.base import StreamOperator
from millstream.engine.runtime.operators.results import ResultCollector
from millstream.engine.runtime.state.heap_incremental import batch_access
from millstream.engine.runtime.state_keys import StateKeys, hashable_key
from millstream.engine.runtime.timers import InternalTimerService
from millstream.engine.runtime.watermarks import NO_TIMESTAMP

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
        self.scoped = may_use_keyed_state(f)  # a rich function may read and write keyed state of its own

    def process_batch(self, values, timestamps):
        fn, missing = self.fn, _MISSING
        out: list[Any] = []
        append = out.append
        keys = list(map(self.key_selector, values))
        # The table's fastest access for this batch; with incremental checkpoints the keys written
        # are recorded as changed once, after the loop (heap_incremental.batch_access).
        get, put, record = batch_access(self.values, keys)
        # A key Python cannot hash (PyFlink keys a list by its pickle) is held as its stand-in
        # (engine.runtime.state_keys); the try costs nothing until a lookup raises.
        backend = self.ctx.keyed_backend if self.scoped else None
        written = 0
        try:
            for k, v in zip(keys, values):
                try:
                    cur = get(k, missing)
                except TypeError:
                    k = keys[written] = hashable_key(k)
                    cur = get(k, missing)
                if backend is not None:
                    backend.current_key = k
                nv = v if cur is missing else fn(cur, v)
                put(k, nv)
                written += 1
                append(nv)
        finally:
            # a failing function's batch too: what it wrote before failing is a change; with the
            # values written (``out``), which a heap table may log instead of looking them up later
            if written == len(keys):
                record(keys, out)
            else:
                record(keys[:written], out[:written])
        if self.emit_updates:
            self.output.emit(out, timestamps)

    def end_input(self) -> None:
        if not self.emit_updates and self.values:
            self.output.emit(list(self.values.values()), None)


class _KeyedTimerService(TimerService):
    """The user's view of the operator's timers: bound to the current key."""

    def __init__(self, op: "KeyedProcessOperator") -> None:
        self.op = op

    def current_processing_time(self) -> int:
        return self.op.ctx.clock()

    def current_watermark(self) -> int:
        return self.op.timers.current_watermark

    def register_processing_time_timer(self, timestamp: int) -> None:
        self.op.timers.register_processing_time_timer(self.op.backend.current_key, timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        self.op.timers.register_event_time_timer(self.op.backend.current_key, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self.op.timers.delete_processing_time_timer(self.op.backend.current_key, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self.op.timers.delete_event_time_timer(self.op.backend.current_key, timestamp)


class _KeyedContext(KeyedProcessFunction.OnTimerContext):
    def __init__(self, op: "KeyedProcessOperator") -> None:
        self.op = op
        self.ts: int | None = None
        self.domain: TimeDomain | None = None
        self.timers = _KeyedTimerService(op)

    def timestamp(self) -> int:
        # PyFlink hands Python functions StreamRecord.getTimestamp(): Long.MIN_VALUE without one.
        return NO_TIMESTAMP if self.ts is None else self.ts

    def timer_service(self) -> TimerService:
        return self.timers

    def get_current_key(self) -> Any:
        return self.op.keys.user_key(self.op.backend.current_key)

    def time_domain(self) -> "TimeDomain | None":
        return self.domain

    def output(self, output_tag: OutputTag, value: Any) -> None:
        self.op.collector.add_side(output_tag, value, self.ts)


class KeyedProcessOperator(StreamOperator):
    wants_ticks = True

    def timer_services(self) -> dict[str, Any]:
        return {"timers": self.timers}

    def restore_state(self, state: Any) -> None:
        if state and "timers" in state:  # a snapshot from before timers moved into keyed state
            self.timers.restore(state["timers"])

    def open(self) -> None:
        super().open()
        assert self.ctx.keyed_backend is not None and self.ctx.key_selector is not None
        self.backend = self.ctx.keyed_backend
        self.key_selector = self.ctx.key_selector
        self.timers = InternalTimerService(self.ctx.clock)
        self.collector = ResultCollector(self)
        self.kctx = _KeyedContext(self)
        self.keys = StateKeys()

    def process_batch(self, values, timestamps):
        fn: KeyedProcessFunction = self.function
        ks, backend, ctx, col = self.key_selector, self.backend, self.kctx, self.collector
        ctx.domain = None
        keys = self.keys
        for i, v in enumerate(values):
            k = ks(v)
            try:
                hash(k)
            except TypeError:
                k = keys.of(k)
            backend.current_key = k
            ctx.ts = None if timestamps is None else timestamps[i]
            col.add_result(fn.process_element(v, ctx), ctx.ts)
        col.flush()

    def _fire_due(self, poll: Any, domain: "TimeDomain") -> None:
        """Fire timers one at a time until none is due, so a timer registered while
        firing, and already due, fires in the same round, in timestamp order."""
        fn: KeyedProcessFunction = self.function
        ctx, col = self.kctx, self.collector
        ctx.domain = domain
        while (timer := poll()) is not None:
            ts, key = timer
            self.backend.current_key = key
            # Event-time timer output carries the timer's time; processing-time output has none.
            ctx.ts = ts if domain is TimeDomain.EVENT_TIME else None
            col.add_result(fn.on_timer(ts, ctx), ctx.ts)
        col.flush()

    def process_watermark(self, watermark: int) -> None:
        self.timers.set_watermark(watermark)
        self._fire_due(self.timers.poll_event_timer, TimeDomain.EVENT_TIME)
        self.output.emit_watermark(watermark)

    def on_tick(self, now_ms: int) -> None:
        now = self.ctx.clock()
        self._fire_due(lambda: self.timers.poll_processing_timer(now), TimeDomain.PROCESSING_TIME)

    def stop_without_drain(self) -> None:
        pass  # pending timers stay in the savepoint and fire after the job resumes from it

    def end_input(self) -> None:
        # Bounded input: pending processing-time timers fire now rather than never.
        self._fire_due(lambda: self.timers.poll_processing_timer(2**63 - 1), TimeDomain.PROCESSING_TIME)
