"""Two-input operators: CoMap, CoFlatMap, CoProcess, KeyedCoProcess and the broadcast-state operators.

Input 1 arrives through ``process_batch``, input 2 through ``process_batch2``.
Broadcast state is operator state that every parallel instance holds in full:
writable while processing broadcast elements, read-only otherwise.
"""
from __future__ import annotations

from typing import Any, Iterable

from millstream.engine.datastream.functions import (
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    KeyedBroadcastProcessFunction,
)
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.datastream.state import BroadcastState as BroadcastStateApi
from millstream.engine.runtime.operators.base import StreamOperator
from millstream.engine.runtime.operators.basic import _NoTimers, _ProcessContext
from millstream.engine.runtime.operators.keyed import KeyedProcessOperator, _KeyedContext
from millstream.engine.runtime.operators.results import ResultCollector
from millstream.engine.runtime.watermarks import NO_TIMESTAMP


class CoMapOperator(StreamOperator):
    def process_batch(self, values, timestamps):
        fn: CoMapFunction = self.function
        self.output.emit([fn.map1(v) for v in values], timestamps)

    def process_batch2(self, values, timestamps):
        fn: CoMapFunction = self.function
        self.output.emit([fn.map2(v) for v in values], timestamps)


class CoFlatMapOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        self.collector = ResultCollector(self)

    def _run(self, fn: Any, values: Iterable[Any], timestamps: list[int] | None) -> None:
        for i, v in enumerate(values):
            self.collector.add_result(fn(v), None if timestamps is None else timestamps[i])
        self.collector.flush()

    def process_batch(self, values, timestamps):
        f: CoFlatMapFunction = self.function
        self._run(f.flat_map1, values, timestamps)

    def process_batch2(self, values, timestamps):
        f: CoFlatMapFunction = self.function
        self._run(f.flat_map2, values, timestamps)


class CoProcessOperator(StreamOperator):
    def open(self) -> None:
        super().open()
        self.collector = ResultCollector(self)
        self.timers = _NoTimers(self.ctx.clock)
        self.pctx = _ProcessContext(self.timers, self.collector)

    def _run(self, fn: Any, values: Iterable[Any], timestamps: list[int] | None) -> None:
        ctx = self.pctx
        for i, v in enumerate(values):
            ctx.ts = None if timestamps is None else timestamps[i]
            self.collector.add_result(fn(v, ctx), ctx.ts)
        self.collector.flush()

    def process_batch(self, values, timestamps):
        self._run(self.function.process_element1, values, timestamps)

    def process_batch2(self, values, timestamps):
        self._run(self.function.process_element2, values, timestamps)

    def process_watermark(self, watermark: int) -> None:
        self.timers.watermark = watermark
        super().process_watermark(watermark)


class KeyedCoProcessOperator(KeyedProcessOperator):
    """Keyed state and timers shared by both inputs; each input has its own key selector."""

    def _run(self, fn: Any, selector: Any, values: Iterable[Any], timestamps: list[int] | None) -> None:
        backend, ctx, col = self.backend, self.kctx, self.collector
        ctx.domain = None
        keys = self.keys
        for i, v in enumerate(values):
            k = selector(v)
            try:
                hash(k)
            except TypeError:
                k = keys.of(k)
            backend.current_key = k
            ctx.ts = None if timestamps is None else timestamps[i]
            col.add_result(fn(v, ctx), ctx.ts)
        col.flush()

    def open(self) -> None:
        self.ctx.key_selector = self.ctx.key_selector or self.ctx.key_selector2
        super().open()

    def process_batch(self, values, timestamps):
        self._run(self.function.process_element1, self.key_selector, values, timestamps)

    def process_batch2(self, values, timestamps):
        self._run(self.function.process_element2, self.ctx.key_selector2, values, timestamps)


class BroadcastState(BroadcastStateApi):
    """MapState's interface over one broadcast state; refuses writes from the regular input."""

    def __init__(self, name: str, data: dict[Any, Any]) -> None:
        self.name = name
        self.data = data
        self.writable = False

    def _check(self) -> None:
        if not self.writable:
            raise TypeError(
                f"broadcast state '{self.name}' is read-only here; update it in process_broadcast_element"
            )

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def contains(self, key: Any) -> bool:
        return key in self.data

    def items(self) -> list[tuple[Any, Any]]:
        return list(self.data.items())

    def keys(self) -> list[Any]:
        return list(self.data)

    def values(self) -> list[Any]:
        return list(self.data.values())

    def is_empty(self) -> bool:
        return not self.data

    def put(self, key: Any, value: Any) -> None:
        self._check()
        self.data[key] = value

    def put_all(self, items: dict[Any, Any]) -> None:
        self._check()
        self.data.update(items)

    def remove(self, key: Any) -> None:
        self._check()
        self.data.pop(key, None)

    def clear(self) -> None:
        self._check()
        self.data.clear()


class _BroadcastStates:
    def __init__(self, names: list[str]) -> None:
        self.states = {n: BroadcastState(n, {}) for n in names}

    def get(self, descriptor: Any, writable: bool) -> BroadcastState:
        state = self.states.get(descriptor.name)
        if state is None:
            raise KeyError(f"broadcast state '{descriptor.name}' was not declared in broadcast(...)")
        state.writable = writable
        return state

    def snapshot(self) -> dict[str, dict[Any, Any]]:
        return {n: dict(s.data) for n, s in self.states.items()}


class _BroadcastContext:
    def __init__(self, op: Any, states: _BroadcastStates, collector: ResultCollector, writable: bool) -> None:
        self.op = op
        self.states = states
        self.collector = collector
        self.writable = writable
        self.ts: int | None = None

    def get_broadcast_state(self, state_descriptor: Any) -> BroadcastState:
        return self.states.get(state_descriptor, self.writable)

    def timestamp(self) -> int:
        # PyFlink hands Python functions StreamRecord.getTimestamp(): Long.MIN_VALUE without one.
        return NO_TIMESTAMP if self.ts is None else self.ts

    def current_processing_time(self) -> int:
        return self.op.ctx.clock()

    def current_watermark(self) -> int:
        timers = getattr(self.op, "timers", None)
        return getattr(timers, "current_watermark", getattr(timers, "watermark", -(2**63)))

    def output(self, output_tag: OutputTag, value: Any) -> None:
        self.collector.add_side(output_tag, value, self.ts)


# The PyFlink context types user code names in hints and isinstance checks.
class _ReadOnlyBroadcastContext(_BroadcastContext, BroadcastProcessFunction.ReadOnlyContext):
    pass


class _WritableBroadcastContext(_BroadcastContext, BroadcastProcessFunction.Context, KeyedBroadcastProcessFunction.Context):
    pass


class BroadcastProcessOperator(StreamOperator):
    def snapshot_state(self) -> Any:
        return {"broadcast": self.states.snapshot()}

    def restore_state(self, state: Any) -> None:
        for name, data in ((state or {}).get("broadcast") or {}).items():
            if name in self.states.states:
                self.states.states[name].data.update(data)

    def open(self) -> None:
        super().open()
        self.collector = ResultCollector(self)
        self.states = _BroadcastStates(self.params.get("broadcast_states", []))
        self.ro_ctx = _ReadOnlyBroadcastContext(self, self.states, self.collector, writable=False)
        self.rw_ctx = _WritableBroadcastContext(self, self.states, self.collector, writable=True)

    def _run(self, fn: Any, ctx: _BroadcastContext, values: Iterable[Any], timestamps: list[int] | None) -> None:
        for i, v in enumerate(values):
            ctx.ts = None if timestamps is None else timestamps[i]
            self.collector.add_result(fn(v, ctx), ctx.ts)
        self.collector.flush()

    def process_batch(self, values, timestamps):
        self._run(self.function.process_element, self.ro_ctx, values, timestamps)

    def process_batch2(self, values, timestamps):
        self._run(self.function.process_broadcast_element, self.rw_ctx, values, timestamps)


class _KeyedBroadcastContext(_KeyedContext, KeyedBroadcastProcessFunction.OnTimerContext):
    """The regular input's (and on_timer's) context: keyed, with read-only broadcast state."""

    def __init__(self, op: "KeyedBroadcastProcessOperator") -> None:
        super().__init__(op)

    def current_processing_time(self) -> int:
        return self.op.ctx.clock()

    def current_watermark(self) -> int:
        return self.op.timers.current_watermark

    def get_broadcast_state(self, state_descriptor: Any) -> BroadcastState:
        return self.op.states.get(state_descriptor, False)  # type: ignore[attr-defined]


class KeyedBroadcastProcessOperator(KeyedProcessOperator):
    def snapshot_state(self) -> Any:
        # Timers are keyed state (timer_services); broadcast state is the same on every subtask.
        return {"broadcast": self.states.snapshot()}

    def restore_state(self, state: Any) -> None:
        if state:
            super().restore_state(state)
            for name, data in (state.get("broadcast") or {}).items():
                if name in self.states.states:
                    self.states.states[name].data.update(data)

    def open(self) -> None:
        super().open()
        self.states = _BroadcastStates(self.params.get("broadcast_states", []))
        self.kctx = _KeyedBroadcastContext(self)
        self.rw_ctx = _WritableBroadcastContext(self, self.states, self.collector, writable=True)

    def process_batch(self, values, timestamps):
        fn, ks, backend, ctx, col = self.function, self.key_selector, self.backend, self.kctx, self.collector
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

    def process_batch2(self, values, timestamps):
        ctx, col = self.rw_ctx, self.collector
        for i, v in enumerate(values):
            ctx.ts = None if timestamps is None else timestamps[i]
            col.add_result(self.function.process_broadcast_element(v, ctx), ctx.ts)
        col.flush()
