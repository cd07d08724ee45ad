"""Timers are keyed state: snapshotted by key group and moved with their keys when rescaling 2 -> 3 -> 1,
driven with a fake clock through real KeyedProcessOperators and window operators."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from millstream.engine.common.time import Time
from millstream.engine.checkpoint.rescale import OperatorRestore, StateRestoreError
from millstream.engine.datastream.functions import KeyedProcessFunction, ProcessWindowFunction
from millstream.engine.datastream.state import ValueStateDescriptor
from millstream.engine.runtime.key_groups import assign_key_to_operator, assign_to_key_group, key_group_range
from millstream.engine.runtime.operators.base import ChainingOutput, StreamOperator
from millstream.engine.runtime.operators.aligned_window import AlignedWindowOperator
from millstream.engine.runtime.operators.aligned_window_table import StateTableAlignedWindowOperator
from millstream.engine.runtime.operators.keyed import KeyedProcessOperator
from millstream.engine.runtime.operators.window import WindowOperator
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.state.task_state_manager import TIMERS_PREFIX, restore_keyed, snapshot_keyed
from millstream.engine.windowing.assigners import TumblingEventTimeWindows
from tests.operator_context import keyed_context

MAX_P = 16
KEYS = [f"k{i}" for i in range(40)]


class Remember(KeyedProcessFunction):
    """Per key: a value, one event-time and one processing-time timer derived from the key."""

    def open(self, runtime_context):
        self.value = runtime_context.get_state(ValueStateDescriptor("v", None))

    def process_element(self, value, ctx):
        key, n = value
        self.value.update(n)
        ctx.timer_service().register_event_time_timer(1000 + n)
        ctx.timer_service().register_processing_time_timer(5000 + n)

    def on_timer(self, timestamp, ctx):
        yield (ctx.time_domain().name, ctx.get_current_key(), timestamp, self.value.value())


class Sink(StreamOperator):
    def __init__(self) -> None:
        self.got: list[Any] = []

    def process_batch(self, values, timestamps):
        self.got.extend(values)

    def process_watermark(self, watermark):
        pass


def _operator(cls: type, function: Any, subtask: int, parallelism: int, now: list[int], params: dict | None = None):
    ctx = dataclasses.replace(
        keyed_context("op", lambda: now[0], HeapKeyedStateBackend(MAX_P)),
        subtask=subtask, parallelism=parallelism, max_parallelism=MAX_P,
    )
    op = cls(function, ctx, params or {})
    sink = Sink()
    op.output = ChainingOutput(sink)
    op.open()
    return op, sink


def _rescale(ops: list, cls: type, function_factory: Any, parallelism: int, now: list[int], params: dict | None = None):
    loaded = {}
    for i, (op, _) in enumerate(ops):
        keyed, kinds = snapshot_keyed(op.backend, op)
        loaded[i] = {"keyed": keyed, "kinds": kinds}
    new = []
    for j in range(parallelism):
        op, sink = _operator(cls, function_factory(), j, parallelism, now, params)
        spec = OperatorRestore("op", j, parallelism, len(ops), MAX_P, {i: None for i in loaded})
        restore_keyed(op.backend, op, loaded, spec)
        new.append((op, sink))
    return new


def _timer_keys(op) -> set:
    return {k for _, k in op.timers.event.items()} | {k for _, k in op.timers.processing.items()}


def test_keyed_process_timers_follow_their_key_groups_2_3_1_and_fire_once_with_their_state():
    now = [0]
    ops = [_operator(KeyedProcessOperator, Remember(), i, 2, now) for i in range(2)]
    for n, key in enumerate(KEYS):
        ops[assign_key_to_operator(key, MAX_P, 2)][0].process_batch([(key, n)], None)
    for parallelism in (3, 1):
        ops = _rescale(ops, KeyedProcessOperator, Remember, parallelism, now)
        for j, (op, _) in enumerate(ops):
            groups = key_group_range(MAX_P, parallelism, j)
            keys = _timer_keys(op)
            assert all(assign_to_key_group(k, MAX_P) in groups for k in keys), "a timer landed outside its key groups"
            assert keys == {k for k in KEYS if assign_key_to_operator(k, MAX_P, parallelism) == j}
    (op, sink), = ops
    op.process_watermark(1000 + len(KEYS))
    now[0] = 5000 + len(KEYS)
    op.on_tick(now[0])
    expected = [("EVENT_TIME", k, 1000 + n, n) for n, k in enumerate(KEYS)]
    expected += [("PROCESSING_TIME", k, 5000 + n, n) for n, k in enumerate(KEYS)]
    assert sorted(sink.got) == sorted(expected)
    op.process_watermark(2**62)
    op.on_tick(2**62)
    assert len(sink.got) == len(expected), "a timer fired twice"


class CountWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, context.window().start, len(list(elements)))


def test_window_timers_keyed_by_key_and_window_move_with_the_key():
    now = [0]
    params = {"assigner": TumblingEventTimeWindows.of(Time.milliseconds(100)), "function_kind": "process"}
    ops = [_operator(WindowOperator, CountWindow(), i, 2, now, params) for i in range(2)]
    for n, key in enumerate(KEYS):
        op = ops[assign_key_to_operator(key, MAX_P, 2)][0]
        op.process_batch([(key, n), (key, n)], [n * 10, n * 10 + 1])
    ops = _rescale(ops, WindowOperator, CountWindow, 3, now, params)
    for j, (op, _) in enumerate(ops):
        keys = {k for _, (k, _w) in op.timers.event.items()}
        assert keys == {k for k in KEYS if assign_key_to_operator(k, MAX_P, 3) == j}
    fired = []
    for op, sink in ops:
        op.process_watermark(10_000)
        fired.extend(sink.got)
    assert sorted(fired) == sorted((k, (n * 10) // 100 * 100, 2) for n, k in enumerate(KEYS))


def _add_counts(a, b):
    return (a[0], a[1] + b[1])


@pytest.mark.parametrize(
    "layouts",
    [(AlignedWindowOperator, StateTableAlignedWindowOperator, AlignedWindowOperator),
     (StateTableAlignedWindowOperator, AlignedWindowOperator, StateTableAlignedWindowOperator)],
    ids=["heap-table-heap", "table-heap-table"],
)
def test_aligned_window_accumulators_move_with_their_key_groups_2_3_1_between_layouts(layouts):
    # The heap layout (by window start) and the backend-table layout checkpoint the same keyed table,
    # so a savepoint of one restores into the other, at another parallelism.
    now = [0]
    params = {
        "assigner": TumblingEventTimeWindows.of(Time.milliseconds(100)), "function_kind": "reduce",
        "trigger": None, "evictor": None, "allowed_lateness": 0, "late_tag": None, "window_function": None,
    }
    records = [((key, n % 7 + 1), (n * 37) % 250) for n, key in enumerate(KEYS * 5)]
    ops = [_operator(layouts[0], _add_counts, i, 2, now, params) for i in range(2)]
    for parallelism, cls, part in ((3, layouts[1], records[:100]), (1, layouts[2], records[100:])):
        for (key, n), ts in part:
            ops[assign_key_to_operator(key, MAX_P, len(ops))][0].process_batch([(key, n)], [ts])
        for op, _ in ops:
            op.process_watermark(-1)  # nothing fires yet, but the watermark is part of the snapshot
        loaded = {}
        for i, (op, _) in enumerate(ops):
            keyed, kinds = snapshot_keyed(op.backend, op)
            loaded[i] = {"keyed": keyed, "kinds": kinds, "operator": op.snapshot_state()}
        new = []
        for j in range(parallelism):
            op, sink = _operator(cls, _add_counts, j, parallelism, now, params)
            spec = OperatorRestore("op", j, parallelism, len(ops), MAX_P, {i: None for i in loaded})
            restore_keyed(op.backend, op, loaded, spec)
            op.restore_state(loaded[0]["operator"])
            new.append((op, sink))
        ops = new
    (op, sink), = ops
    op.process_watermark(2**62)
    expected: dict = {}
    for (key, n), ts in records:
        expected[(key, ts // 100 * 100 + 99)] = expected.get((key, ts // 100 * 100 + 99), 0) + n
    assert sorted((v[0], v[1]) for v in sink.got) == sorted((k, total) for (k, _end), total in expected.items())
    assert len(sink.got) == len(expected)


def test_timers_of_a_service_the_operator_does_not_have_are_refused():
    now = [0]
    op, _ = _operator(KeyedProcessOperator, Remember(), 0, 1, now)
    loaded = {0: {"keyed": {3: {TIMERS_PREFIX + "gone": [("k", [("EVENT_TIME", 5, "k")])]}}, "kinds": {}}}
    with pytest.raises(StateRestoreError, match="gone"):
        restore_keyed(op.backend, op, loaded, OperatorRestore("op", 0, 1, 1, MAX_P, {0: None}))


def test_operator_state_lists_are_split_and_broadcast_style_state_is_copied_on_rescale():
    from millstream.engine.runtime.state.task_state_manager import restore_operator_state, restore_splits

    lists = {0: {"operator": ["a", "b", "c"]}, 1: {"operator": ["d"]}}
    shares = [restore_operator_state(lists, OperatorRestore("op", j, 3, 2, MAX_P, {})) for j in range(3)]
    assert shares == [["a", "b"], ["c"], ["d"]]
    broadcast = {0: {"operator": {"broadcast": {"rules": {"x": 1}}}}, 1: {"operator": {"broadcast": {"rules": {"x": 1}}}}}
    for j in range(3):
        assert restore_operator_state(broadcast, OperatorRestore("op", j, 3, 2, MAX_P, {})) == {"broadcast": {"rules": {"x": 1}}}
    own = {1: {"operator": {"mine": True}}}
    assert restore_operator_state(own, OperatorRestore("op", 1, 2, 2, MAX_P, {})) == {"mine": True}
    splits = {0: {"splits": [[0, 5]]}, 1: {"splits": [[5, 9], [20, 30]]}}
    assert [restore_splits(splits, OperatorRestore("src", j, 3, 2, MAX_P, {})) for j in range(3)] == [
        [[0, 5]], [[5, 9]], [[20, 30]],
    ]
    with pytest.raises(StateRestoreError, match="format before split lists"):
        restore_splits({0: {"position": 17}}, OperatorRestore("src", 0, 1, 1, MAX_P, {}))


def test_union_state_goes_whole_to_every_subtask_also_at_an_unchanged_parallelism():
    from millstream.engine.runtime.state.task_state_manager import restore_function_state

    files = {
        "h0": {"function": {"list": {"x": [1]}, "union": {"u": ["a"]}}},
        "h1": {"function": {"list": {"x": [2]}, "union": {"u": ["b"]}}},
    }
    spec = OperatorRestore("op", 1, 2, 2, MAX_P, {1: "h1"}, peer_handles={0: "h0", 1: "h1"})
    read = []
    state = restore_function_state({1: files["h1"]}, spec, lambda h: read.append(h) or files[h])
    assert state == {"list": {"x": [2]}, "union": {"u": ["a", "b"]}}
    assert read == ["h0"], "only the other subtask's file is read"
    no_union = {1: {"function": {"list": {"x": [2]}, "union": {}}}}
    restore_function_state(no_union, spec, lambda h: pytest.fail("read a peer without union state"))
