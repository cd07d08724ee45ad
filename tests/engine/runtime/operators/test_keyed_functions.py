"""Map, flat_map, filter and reduce after key_by are keyed operators: a rich function's keyed state
is the state of the current record's key, and lands in the backend's key groups like any keyed state."""
from __future__ import annotations

from typing import Any

import pytest

from millstream.engine.datastream.functions import (
    FilterFunction,
    FlatMapFunction,
    MapFunction,
    ReduceFunction,
    RuntimeContext,
)
from millstream.engine.datastream.state import ListStateDescriptor, ValueStateDescriptor
from millstream.engine.runtime.key_groups import assign_to_key_group
from millstream.engine.runtime.operators.base import OperatorContext
from millstream.engine.runtime.operators.basic import FilterOperator, FlatMapOperator, MapOperator
from millstream.engine.runtime.operators.keyed import ReduceOperator
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.task_metrics import TaskIOMetrics
from tests.operator_context import keyed_context

RECORDS = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("a", 6)]


class _Out:
    def __init__(self) -> None:
        self.values: list[Any] = []

    def emit(self, values, timestamps) -> None:
        self.values.extend(values)

    def emit_watermark(self, watermark) -> None:
        pass

    def emit_status(self, idle) -> None:
        pass


def _run(cls, fn, records=RECORDS, ctx: OperatorContext | None = None, batch_size: int = 4):
    op = cls(fn, ctx or keyed_context("op", lambda: 0), {})
    op.output = out = _Out()
    op.open()
    for i in range(0, len(records), batch_size):  # several batches: state must carry across them
        op.process_batch(records[i : i + batch_size], None)
    op.end_input()
    return op, out.values


class CountingMap(MapFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", None))

    def map(self, value):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        return (value[0], n)


class FirstOfKey(FlatMapFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", None))

    def flat_map(self, value):
        previous = self.seen.value()  # None for each new key, as in PyFlink
        if previous is None:
            self.seen.update(value[1])
        yield (value[0], previous)


class EveryOtherOfKey(FilterFunction):
    def open(self, runtime_context: RuntimeContext) -> None:
        self.n = runtime_context.get_state(ValueStateDescriptor("n", None))

    def filter(self, value):
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        return n % 2 == 1


class ReduceCountingCalls(ReduceFunction):
    """Reads and writes keyed state of its own inside reduce()."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.calls = runtime_context.get_list_state(ListStateDescriptor("calls", None))

    def reduce(self, a, b):
        self.calls.add(b[1])
        return (a[0], a[1] + b[1], list(self.calls.get()))


def test_keyed_map_state_is_per_key() -> None:
    _, out = _run(MapOperator, CountingMap())
    assert out == [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2), ("a", 3)]


def test_keyed_flat_map_state_is_none_for_each_new_key() -> None:
    _, out = _run(FlatMapOperator, FirstOfKey())
    assert out == [("a", None), ("b", None), ("a", 1), ("c", None), ("b", 2), ("a", 1)]


def test_keyed_filter_state_is_per_key() -> None:
    _, out = _run(FilterOperator, EveryOtherOfKey())
    assert out == [("a", 1), ("b", 2), ("c", 4), ("a", 6)]


def test_a_reduce_function_reading_its_own_state_sees_its_key_only() -> None:
    _, out = _run(ReduceOperator, ReduceCountingCalls())
    assert out == [("a", 1), ("b", 2), ("a", 4, [3]), ("c", 4), ("b", 7, [5]), ("a", 10, [3, 6])]


def test_keyed_function_state_is_snapshot_by_the_key_group_of_its_key() -> None:
    op, _ = _run(MapOperator, CountingMap())
    backend = op.ctx.keyed_backend
    groups = backend.snapshot_by_key_group()
    for key, count in (("a", 3), ("b", 2), ("c", 1)):
        assert (key, count) in groups[assign_to_key_group(key, backend.max_parallelism)]["count"]


@pytest.mark.parametrize("cls", [MapOperator, FlatMapOperator, FilterOperator])
def test_state_on_a_non_keyed_stream_is_refused_with_a_clear_error(cls) -> None:
    fn = {MapOperator: CountingMap, FlatMapOperator: FirstOfKey, FilterOperator: EveryOtherOfKey}[cls]()
    ctx = OperatorContext(
        job_id="job", task_name="t", operator_name="NotKeyed", subtask=0, parallelism=1,
        max_parallelism=128, attempt=0, job_type="STREAMING", metrics=TaskIOMetrics(),
    )
    with pytest.raises(TypeError, match="keyed state is only available on a keyed stream; 'NotKeyed'"):
        _run(cls, fn, ctx=ctx)


def test_plain_callables_after_key_by_do_not_compute_keys() -> None:
    """A lambda cannot reach keyed state, so the keyed map does not pay for its key."""
    calls: list[Any] = []
    ctx = keyed_context("op", lambda: 0)
    ctx.key_selector = lambda r: calls.append(r) or r[0]
    _, out = _run(MapOperator, lambda r: r[1] * 10, ctx=ctx)
    assert out == [10, 20, 30, 40, 50, 60] and calls == []


def test_the_batch_reduce_with_state_emits_one_value_per_key_at_the_end() -> None:
    ctx = keyed_context("op", lambda: 0, backend=HeapKeyedStateBackend(128), job_type="BATCH")
    _, out = _run(ReduceOperator, ReduceCountingCalls(), ctx=ctx)
    assert sorted(out, key=lambda r: r[0]) == [("a", 10, [3, 6]), ("b", 7, [5]), ("c", 4)]


def test_a_reduce_failing_mid_batch_leaves_what_it_wrote_recorded_for_the_next_delta() -> None:
    """The reduce records the keys it wrote after its loop (heap_incremental.batch_access): a function
    that raises mid-batch must not leave written keys out of the next incremental checkpoint."""

    def fail_on_c(a, b):
        if a[0] == "c":
            raise ValueError("boom")
        return (a[0], a[1] + b[1])

    backend = HeapKeyedStateBackend(128, incremental=True)
    op = ReduceOperator(fail_on_c, keyed_context("op", lambda: 0, backend=backend), {})
    op.output = _Out()
    op.open()
    with pytest.raises(ValueError):
        op.process_batch([("a", 1), ("b", 1), ("c", 1), ("a", 1), ("c", 1), ("b", 1)], None)
    table = backend.tables["_reduce"]
    assert dict(table) == {"a": ("a", 2), "b": ("b", 1), "c": ("c", 1)}
    assert table.changed == {"a", "b", "c"}
