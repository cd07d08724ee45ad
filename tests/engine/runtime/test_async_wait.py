"""Async I/O: the stream element queues and the retry decision as pure classes (a fake clock is the
``elapsed_ms`` argument), then the AsyncWaitOperator with its real asyncio loop thread: capacity
as backpressure, timeouts, retries, failures, and the in-flight records through snapshot/restore."""
from __future__ import annotations

import asyncio
import functools
import threading
import time
from typing import Any

import pytest

from millstream.engine.common.time import Time
from millstream.engine.datastream import async_retry_predicates
from millstream.engine.datastream.async_retry_strategies import (
    NO_RETRY_STRATEGY,
    ExponentialBackoffDelayRetryStrategy,
    FixedDelayRetryStrategy,
)
from millstream.engine.datastream.functions import AsyncFunction, AsyncRetryStrategy
from millstream.engine.runtime.io.channel import TaskCancelled
from millstream.engine.runtime.operators.async_queue import (
    OrderedStreamElementQueue,
    UnorderedStreamElementQueue,
    WatermarkEntry,
    check_results,
    retry_backoff_ms,
)
from millstream.engine.runtime.operators.async_wait import AsyncFunctionError, AsyncWaitOperator
from millstream.engine.runtime.operators.base import OperatorContext
from millstream.engine.runtime.task_metrics import TaskIOMetrics


def _out(entries: list[Any]) -> list[Any]:
    return [("w", e.watermark) if isinstance(e, WatermarkEntry) else (e.value, tuple(e.results)) for e in entries]


# -- queues ---------------------------------------------------------------------------------
def test_ordered_queue_emits_in_input_order_whatever_completes_first() -> None:
    q = OrderedStreamElementQueue(10)
    a, b, c = (q.put_record(v, None) for v in "abc")
    q.complete(c, ["C"])
    q.complete(b, ["B"])
    assert q.pop_completed() == [] and len(q) == 3  # b and c wait for a
    q.complete(a, [])
    assert _out(q.pop_completed()) == [("a", ()), ("b", ("B",)), ("c", ("C",))]
    assert len(q) == 0


def test_ordered_queue_keeps_a_watermark_behind_earlier_records() -> None:
    q = OrderedStreamElementQueue(10)
    a = q.put_record("a", 1)
    q.put_watermark(5)
    b = q.put_record("b", 6)
    q.complete(b, ["B"])
    assert q.pop_completed() == []
    q.complete(a, ["A"])
    assert _out(q.pop_completed()) == [("a", ("A",)), ("w", 5), ("b", ("B",))]


def test_unordered_queue_emits_as_completed_but_never_across_a_watermark() -> None:
    q = UnorderedStreamElementQueue(10)
    a, b = q.put_record("a", 1), q.put_record("b", 2)
    q.put_watermark(3)
    c = q.put_record("c", 4)
    q.complete(c, ["C"])
    q.complete(b, ["B"])
    assert _out(q.pop_completed()) == [("b", ("B",))]  # before a: unordered; c waits behind the watermark
    q.complete(a, ["A"])
    assert _out(q.pop_completed()) == [("a", ("A",)), ("w", 3), ("c", ("C",))]
    d = q.put_record("d", 5)
    q.put_watermark(6)
    q.put_watermark(7)
    assert q.pop_completed() == []  # d holds both watermarks back
    q.complete(d, ["D"])
    assert _out(q.pop_completed()) == [("d", ("D",)), ("w", 6), ("w", 7)]


def test_a_watermark_on_an_empty_queue_leaves_at_once_and_a_second_completion_is_ignored() -> None:
    for q in (OrderedStreamElementQueue(2), UnorderedStreamElementQueue(2)):
        q.put_watermark(9)
        assert _out(q.pop_completed()) == [("w", 9)]
        e = q.put_record("x", None)
        q.complete(e, ["first"])
        q.complete(e, ["second"])  # a timeout racing a result: the first outcome stands
        assert _out(q.pop_completed()) == [("x", ("first",))]


def test_capacity_counts_records_and_watermarks_and_values_keep_input_order() -> None:
    q = UnorderedStreamElementQueue(3)
    a = q.put_record("a", None)
    q.put_watermark(1)
    b = q.put_record("b", None)
    assert q.is_full() and len(q) == 3
    q.complete(b, ["B"])  # completed but held behind the watermark: still in the snapshot
    snapshot = [("w", e.watermark) if isinstance(e, WatermarkEntry) else e.value for e in q.values()]
    assert snapshot == ["a", ("w", 1), "b"]
    q.complete(a, [])
    assert len(q.pop_completed()) == 3 and not q.is_full()
    with pytest.raises(ValueError):
        OrderedStreamElementQueue(0)


# -- retry decisions (pure: elapsed time is an argument) -------------------------------------
def test_fixed_delay_retries_max_attempts_times_on_matching_outcomes_only() -> None:
    s = FixedDelayRetryStrategy(2, 100, async_retry_predicates.empty_result_predicate,
                                functools.partial(async_retry_predicates.exception_type_predicate,
                                                  expected_error_type=ConnectionError))
    assert retry_backoff_ms(s, 1, [], None, 0, 1000) == 100
    assert retry_backoff_ms(s, 2, None, ConnectionError("x"), 0, 1000) == 100
    assert retry_backoff_ms(s, 3, [], None, 0, 1000) is None  # 2 retries after the first call
    assert retry_backoff_ms(s, 1, ["ok"], None, 0, 1000) is None
    assert retry_backoff_ms(s, 1, None, ValueError("x"), 0, 1000) is None  # not a ConnectionError
    assert retry_backoff_ms(s, 1, [], None, 1001, 1000) is None  # the record's timeout has passed
    assert retry_backoff_ms(NO_RETRY_STRATEGY, 1, [], ConnectionError(), 0, 1000) is None


def test_exponential_backoff_grows_by_the_multiplier_up_to_the_cap() -> None:
    s = AsyncRetryStrategy.exponential_backoff(5, 10, 50, 2.0, None, async_retry_predicates.has_exception_predicate)
    assert isinstance(s, ExponentialBackoffDelayRetryStrategy)
    assert [s.get_backoff_time_millis(n) for n in range(1, 6)] == [10, 20, 40, 50, 50]
    assert retry_backoff_ms(s, 3, None, RuntimeError(), 0, 1000) == 40
    assert retry_backoff_ms(s, 6, None, RuntimeError(), 0, 1000) is None
    with pytest.raises(AssertionError, match="multiplier should be greater than zero"):
        AsyncRetryStrategy.exponential_backoff(1, 1, 1, 0, None, None)


def test_results_must_be_a_list() -> None:
    assert check_results((1, 2), "F") == [1, 2]
    with pytest.raises(TypeError, match="cannot be None"):
        check_results(None, "F")
    with pytest.raises(TypeError, match=r"wrap a single result as \[result\]"):
        check_results("text", "F")
    with pytest.raises(TypeError, match="should be a list"):
        check_results(5, "F")


# -- the operator with its real event loop -------------------------------------------------
class Collected:
    def __init__(self) -> None:
        self.items: list[Any] = []

    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        self.items.extend(zip(values, timestamps) if timestamps is not None else values)

    def emit_watermark(self, watermark: int) -> None:
        self.items.append(("wm", watermark))

    def emit_status(self, idle: bool) -> None:
        pass


def _operator(fn: AsyncFunction, ordered: bool = True, capacity: int = 10, timeout_ms: int = 5000,
              strategy: Any = NO_RETRY_STRATEGY) -> tuple[AsyncWaitOperator, Collected]:
    ctx = OperatorContext(job_id="j", task_name="t", operator_name="async wait operator", subtask=0, parallelism=1,
                          max_parallelism=128, attempt=0, job_type="STREAMING", metrics=TaskIOMetrics())
    op = AsyncWaitOperator(fn, ctx, {"timeout_ms": timeout_ms, "capacity": capacity, "ordered": ordered,
                                     "retry_strategy": strategy})
    out = Collected()
    op.output = out
    op.cancelled = threading.Event()
    op.open()
    return op, out


class Delayed(AsyncFunction):
    """Sleeps ``value`` ms; counts the calls in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.max_in_flight = 0

    async def async_invoke(self, value: int) -> list[Any]:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(value / 1000)
        self.in_flight -= 1
        return [value]


def test_ordered_operator_keeps_input_order_and_stamps_results_with_the_input_timestamp() -> None:
    op, out = _operator(Delayed(), ordered=True)
    try:
        op.process_batch([40, 10, 30, 0], [1, 2, 3, 4])
        op.process_watermark(4)
        op.end_input()
        assert out.items == [(40, 1), (10, 2), (30, 3), (0, 4), ("wm", 4)]
    finally:
        op.close()


def test_unordered_operator_emits_in_completion_order() -> None:
    op, out = _operator(Delayed(), ordered=False)
    try:
        op.process_batch([300, 0, 150], None)
        op.end_input()
        assert out.items == [0, 150, 300]
    finally:
        op.close()


def test_capacity_bounds_the_calls_in_flight_by_blocking_the_task_thread() -> None:
    fn = Delayed()
    op, out = _operator(fn, ordered=False, capacity=3)
    try:
        t0 = time.monotonic()
        op.process_batch([50] * 9, None)  # 9 calls of 50 ms, 3 at a time: returns after >= 2 rounds
        assert time.monotonic() - t0 >= 0.09
        op.end_input()
        assert fn.max_in_flight == 3 and len(out.items) == 9
        assert op.process_mail() == float("inf")  # nothing in flight: the task loop need not come back
    finally:
        op.close()


class Stuck(AsyncFunction):
    def __init__(self, fallback: bool = False) -> None:
        self.fallback = fallback

    async def async_invoke(self, value: Any) -> list[Any]:
        await asyncio.sleep(3600)
        return [value]

    def timeout(self, value: Any) -> list[Any]:
        return [f"fallback {value}"] if self.fallback else super().timeout(value)


def test_the_default_timeout_fails_the_task_and_a_user_timeout_gives_a_fallback() -> None:
    op, _ = _operator(Stuck(), timeout_ms=50)
    try:
        op.process_batch(["x"], None)
        with pytest.raises(TimeoutError, match="Async function call has timed out for input: x"):
            op.end_input()
    finally:
        op.close()
    op, out = _operator(Stuck(fallback=True), timeout_ms=50)
    try:
        op.process_batch(["x", "y"], None)
        op.end_input()
        assert out.items == ["fallback x", "fallback y"]
    finally:
        op.close()


class Flaky(AsyncFunction):
    """Fails with ConnectionError ``failures`` times per value, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: dict[Any, int] = {}

    async def async_invoke(self, value: Any) -> list[Any]:
        n = self.calls[value] = self.calls.get(value, 0) + 1
        if n <= self.failures:
            raise ConnectionError(f"attempt {n}")
        return [(value, n)]


def test_retries_follow_the_strategy_and_an_exhausted_or_unretried_error_fails_clearly() -> None:
    retry = AsyncRetryStrategy.fixed_delay(
        3, 5, None, functools.partial(async_retry_predicates.exception_type_predicate, expected_error_type=ConnectionError)
    )
    op, out = _operator(Flaky(2), strategy=retry)
    try:
        op.process_batch(["a", "b"], None)
        op.end_input()
        assert out.items == [("a", 3), ("b", 3)]
    finally:
        op.close()
    op, _ = _operator(Flaky(10), strategy=retry)
    try:
        op.process_batch(["a"], None)
        with pytest.raises(AsyncFunctionError, match="Flaky failed on input 'a': ConnectionError: attempt 4"):
            op.end_input()
    finally:
        op.close()


def test_a_blocked_task_thread_ends_when_the_task_is_cancelled() -> None:
    op, _ = _operator(Stuck(), capacity=1, timeout_ms=0)
    try:
        op.process_batch(["x"], None)
        threading.Timer(0.1, op.cancelled.set).start()
        with pytest.raises(TaskCancelled):
            op.process_batch(["y"], None)  # full: waits for a call that never ends, until cancelled
    finally:
        op.close()


class Gated(AsyncFunction):
    """Answers only once ``release`` is set (on the loop: asyncio polling of a threading.Event)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[Any] = []

    async def async_invoke(self, value: Any) -> list[Any]:
        self.calls.append(value)
        while not self.release.is_set():
            await asyncio.sleep(0.005)
        return [value * 10]


def test_in_flight_records_go_into_the_snapshot_and_are_called_again_on_restore() -> None:
    first = Gated()
    op, out = _operator(first, ordered=True)
    try:
        op.process_batch([1, 2], [100, 200])
        op.process_watermark(150)
        op.process_batch([3], [300])
        op.prepare_snapshot_pre_barrier(1)
        state = op.snapshot_state()
        assert state == [("r", 1, 100), ("r", 2, 200), ("w", 150), ("r", 3, 300)]
        assert out.items == []  # nothing completed before the barrier: nothing emitted
    finally:
        op.close()  # the attempt fails; its calls are abandoned
    second = Gated()
    second.release.set()
    op, out = _operator(second, ordered=True)
    try:
        op.restore_state(state)
        op.end_input()
        assert out.items == [(10, 100), (20, 200), ("wm", 150), (30, 300)]
        assert sorted(second.calls) == [1, 2, 3]
    finally:
        op.close()


def test_async_data_stream_validates_as_pyflink_does() -> None:
    from millstream.engine.datastream import AsyncDataStream, StreamExecutionEnvironment

    class NotAsync(AsyncFunction):
        def async_invoke(self, value):  # type: ignore[override]
            return [value]

    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([1])
    with pytest.raises(Exception, match="should be declared as 'async def'"):
        AsyncDataStream.ordered_wait(ds, NotAsync(), Time.seconds(1))
    retry = AsyncRetryStrategy.fixed_delay(1, 1, None, None)
    with pytest.raises(Exception, match="Timeout should be configured when do async with retry"):
        AsyncDataStream.unordered_wait_with_retry(ds, Delayed(), Time.seconds(0), retry)
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        AsyncDataStream.ordered_wait(ds, Delayed(), Time.seconds(1), 0)


# -- whole programs on the in-process mini-cluster -----------------------------------------
class Square(AsyncFunction):
    async def async_invoke(self, value: int) -> list[Any]:
        await asyncio.sleep(0.001 * (value % 7))
        if value == -1:
            raise LookupError("no such key")
        return [value * value]


def _program(values: list[int], ordered: bool, parallelism: int = 2) -> Any:
    from millstream.engine.common.typeinfo import Types
    from millstream.engine.datastream import AsyncDataStream, StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    ds = env.from_collection(values, type_info=Types.INT()).rebalance().map(lambda v: v)
    wait = AsyncDataStream.ordered_wait if ordered else AsyncDataStream.unordered_wait
    return wait(ds, Square(), Time.seconds(10), 5, Types.INT()).map(lambda v: v + 1)


def test_programs_run_in_process_with_chained_async_operators() -> None:
    values = list(range(200))
    expected = sorted(v * v + 1 for v in values)
    assert sorted(_program(values, ordered=True).execute_and_collect()) == expected
    assert sorted(_program(values, ordered=False).execute_and_collect()) == expected
    # One subtask, ordered: the output keeps the input order although calls finish out of order.
    assert list(_program(values, ordered=True, parallelism=1).execute_and_collect()) == [v * v + 1 for v in values]


def test_a_failing_async_function_fails_the_job_with_its_error() -> None:
    with pytest.raises(Exception, match=r"Square failed on input -1: LookupError: no such key"):
        list(_program([1, 2, -1, 3], ordered=True, parallelism=1).execute_and_collect())


def test_the_plan_fuses_the_async_operator_with_neighbouring_python_functions_as_pyflink_shows_it() -> None:
    import json

    from millstream.engine.common.typeinfo import Types
    from millstream.engine.datastream import AsyncDataStream, StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    ds = env.from_collection([1, 2], type_info=Types.INT()).map(lambda x: x, Types.INT())
    AsyncDataStream.ordered_wait(ds, Square(), Time.seconds(1), 5, Types.INT()).map(lambda x: x, Types.INT()).print()
    # Recorded from PyFlink 2.3.0's get_execution_plan() for this program.
    assert [n["contents"] for n in json.loads(env.get_execution_plan())["nodes"]] == [
        "Source: Collection Source", "Map, async wait operator, Map", "Sink: Print to Std. Out",
    ]
