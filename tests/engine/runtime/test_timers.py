"""InternalTimerService with a fake clock, and the timers a KeyedProcessFunction sees through its operator."""
from __future__ import annotations

from typing import Any

import pytest

from millstream.engine.datastream.functions import KeyedProcessFunction, TimeDomain
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.datastream.state import ValueStateDescriptor
from millstream.engine.runtime.operators.keyed import KeyedProcessOperator
from millstream.engine.runtime.timers import EVENT_TIME, PROCESSING_TIME, InternalTimerService
from tests.operator_context import keyed_context

MIN = -(2**63)
MAX = 2**63 - 1


def _service(now: list[int] | None = None) -> InternalTimerService:
    now = now if now is not None else [0]
    return InternalTimerService(lambda: now[0])


# -- event-time timers ------------------------------------------------------------------


def test_event_timers_fire_in_timestamp_order_up_to_the_watermark():
    s = _service()
    for key, ts in [("a", 30), ("b", 10), ("c", 20), ("a", 40), ("b", -5)]:
        s.register_event_time_timer(key, ts)
    assert s.current_watermark == MIN
    assert s.advance_watermark(20) == [(-5, "b"), (10, "b"), (20, "c")]
    assert s.advance_watermark(20) == []
    assert s.advance_watermark(100) == [(30, "a"), (40, "a")]


def test_a_watermark_going_backwards_fires_nothing_and_keeps_the_higher_one():
    s = _service()
    s.register_event_time_timer("k", 50)
    s.advance_watermark(40)
    assert s.advance_watermark(10) == []
    assert s.current_watermark == 40
    assert s.advance_watermark(50) == [(50, "k")]


def test_a_key_and_timestamp_pair_is_registered_once():
    s = _service()
    for _ in range(3):
        s.register_event_time_timer("k", 10)
    s.register_event_time_timer("other", 10)
    s.register_event_time_timer(("k", "window"), 10)
    fired = s.advance_watermark(10)
    assert sorted(map(repr, fired)) == sorted(map(repr, [(10, "k"), (10, "other"), (10, ("k", "window"))]))


def test_deleted_timers_never_fire_and_re_registering_fires_once():
    s = _service()
    s.register_event_time_timer("a", 10)
    s.register_event_time_timer("b", 10)
    s.delete_event_time_timer("a", 10)
    s.delete_event_time_timer("zzz", 99)  # deleting an unknown timer is a no-op
    s.register_event_time_timer("c", 20)
    s.delete_event_time_timer("c", 20)
    s.register_event_time_timer("c", 20)
    assert s.advance_watermark(100) == [(10, "b"), (20, "c")]


def test_event_and_processing_domains_are_separate():
    s = _service([0])
    s.register_event_time_timer("k", 10)
    s.register_processing_time_timer("k", 10)
    s.delete_processing_time_timer("k", 10)
    assert s.due_processing_timers() == []
    assert s.advance_watermark(10) == [(10, "k")]


def test_timestamps_are_normalised_to_int():
    s = _service()
    s.register_event_time_timer("k", 10.0)
    s.register_event_time_timer("k", 10)
    assert s.advance_watermark(10) == [(10, "k")]


# -- processing-time timers -------------------------------------------------------------


def test_processing_timers_follow_the_fake_clock():
    now = [0]
    s = _service(now)
    s.register_processing_time_timer("a", 100)
    s.register_processing_time_timer("b", 50)
    s.register_processing_time_timer("c", 150)
    assert s.next_processing_time() == 50
    assert s.due_processing_timers() == []
    now[0] = 100
    assert s.due_processing_timers() == [(50, "b"), (100, "a")]
    assert s.next_processing_time() == 150
    now[0] = 10_000
    assert s.due_processing_timers() == [(150, "c")]
    assert s.next_processing_time() is None


def test_next_processing_time_skips_deleted_timers():
    s = _service()
    s.register_processing_time_timer("a", 10)
    s.register_processing_time_timer("b", 20)
    s.delete_processing_time_timer("a", 10)
    assert s.next_processing_time() == 20


# -- snapshot / restore -----------------------------------------------------------------


def test_snapshot_restore_round_trip():
    now = [0]
    s = _service(now)
    s.register_event_time_timer("a", 30)
    s.register_event_time_timer(("b", 1), 10)
    s.register_event_time_timer("gone", 20)
    s.delete_event_time_timer("gone", 20)
    s.register_processing_time_timer("p", 500)
    s.register_event_time_timer("fired", 1)
    s.advance_watermark(5)

    snap = s.snapshot()
    assert snap == {EVENT_TIME: [(10, ("b", 1)), (30, "a")], PROCESSING_TIME: [(500, "p")]}

    r = _service(now)
    r.restore(snap)
    assert r.snapshot() == snap
    now[0] = 500
    assert r.due_processing_timers() == [(500, "p")]
    assert r.advance_watermark(MAX) == [(10, ("b", 1)), (30, "a")]


def test_restore_of_an_empty_snapshot():
    r = _service()
    r.restore({})
    assert r.snapshot() == {EVENT_TIME: [], PROCESSING_TIME: []}


# -- KeyedProcessOperator: the user's view of timers ------------------------------------


class Collect:
    def __init__(self) -> None:
        self.records: list[tuple[Any, int | None]] = []
        self.watermarks: list[int] = []
        self.statuses: list[bool] = []

    def emit(self, values, timestamps) -> None:
        ts = timestamps if timestamps is not None else [None] * len(values)
        self.records.extend(zip(values, ts))

    def emit_watermark(self, watermark) -> None:
        self.watermarks.append(watermark)

    def emit_status(self, idle) -> None:
        self.statuses.append(idle)


def _keyed_process(fn: KeyedProcessFunction, now: list[int]) -> tuple[KeyedProcessOperator, Collect]:
    ctx = keyed_context("KeyedProcess", lambda: now[0])
    op = KeyedProcessOperator(fn, ctx, {})
    out = Collect()
    op.output = out
    op.open()
    return op, out


class TimerAtValue(KeyedProcessFunction):
    """Registers an event-time timer at the element's second field; reports key, domain and watermark on firing."""

    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(value[1])
        if len(value) > 2 and value[2] == "cancel":
            ctx.timer_service().delete_event_time_timer(value[1])
        return None

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), timestamp, ctx.time_domain(), ctx.timestamp(), ctx.timer_service().current_watermark())


def test_event_time_timers_fire_in_order_with_the_key_set_and_timer_timestamps():
    op, out = _keyed_process(TimerAtValue(), [0])
    op.process_batch([("b", 30), ("a", 10), ("c", 20), ("a", 50)], [1, 2, 3, 4])
    assert out.records == []
    op.process_watermark(30)
    assert out.records == [
        (("a", 10, TimeDomain.EVENT_TIME, 10, 30), 10),
        (("c", 20, TimeDomain.EVENT_TIME, 20, 30), 20),
        (("b", 30, TimeDomain.EVENT_TIME, 30, 30), 30),
    ]
    assert out.watermarks == [30]
    op.process_watermark(MAX)
    assert out.records[-1] == (("a", 50, TimeDomain.EVENT_TIME, 50, MAX), 50)


def test_deleting_an_event_time_timer():
    op, out = _keyed_process(TimerAtValue(), [0])
    op.process_batch([("a", 10), ("b", 10, "cancel")], [0, 0])
    op.process_watermark(100)
    assert [r[0][0] for r in out.records] == ["a"]


def test_the_same_key_and_time_fires_once():
    op, out = _keyed_process(TimerAtValue(), [0])
    op.process_batch([("a", 10), ("a", 10), ("a", 10)], None)
    op.process_watermark(10)
    assert len(out.records) == 1


class ProcessingTimer(KeyedProcessFunction):
    def process_element(self, value, ctx):
        ts = ctx.timer_service().current_processing_time() + value[1]
        ctx.timer_service().register_processing_time_timer(ts)
        if value[1] < 0:
            ctx.timer_service().delete_processing_time_timer(ts)
        yield ("seen", value[0], ctx.timestamp())

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), timestamp, ctx.time_domain())


def test_processing_time_timers_fire_on_tick_with_the_fake_clock_and_carry_no_timestamp():
    now = [1000]
    op, out = _keyed_process(ProcessingTimer(), now)
    assert op.wants_ticks
    op.process_batch([("a", 100), ("b", 50), ("c", -7)], [5, 6, 7])
    assert out.records == [(("seen", "a", 5), 5), (("seen", "b", 6), 6), (("seen", "c", 7), 7)]
    out.records.clear()
    now[0] = 1049
    op.on_tick(1049)
    assert out.records == []
    now[0] = 1100
    op.on_tick(1100)
    assert out.records == [(("b", 1050, TimeDomain.PROCESSING_TIME), None), (("a", 1100, TimeDomain.PROCESSING_TIME), None)]
    op.process_watermark(MAX)  # event time does not fire processing-time timers
    assert len(out.records) == 2


def test_end_input_fires_pending_processing_time_timers():
    now = [0]
    op, out = _keyed_process(ProcessingTimer(), now)
    op.process_batch([("a", 10**9)], None)
    out.records.clear()
    op.end_input()
    assert out.records == [(("a", 10**9, TimeDomain.PROCESSING_TIME), None)]


LATE = OutputTag("late")


class SideOutputs(KeyedProcessFunction):
    def process_element(self, value, ctx):
        if ctx.timestamp() < ctx.timer_service().current_watermark():
            yield LATE, value
        else:
            yield value
        ctx.timer_service().register_event_time_timer(ctx.timestamp())

    def on_timer(self, timestamp, ctx):
        yield OutputTag("timers"), (ctx.get_current_key(), timestamp)


def test_yielding_an_output_tag_reaches_the_side_output_with_the_record_timestamp():
    op, out = _keyed_process(SideOutputs(), [0])
    late, timers = Collect(), Collect()
    op.side_outputs["late"] = late
    op.side_outputs["timers"] = timers
    op.process_batch([("a", 1), ("b", 2)], [100, 200])
    op.process_watermark(150)
    op.process_batch([("c", 3), ("d", 4)], [120, 300])
    assert out.records == [(("a", 1), 100), (("b", 2), 200), (("d", 4), 300)]
    assert late.records == [(("c", 3), 120)]
    assert timers.records == [(("a", 100), 100)]
    op.process_watermark(MAX)
    assert timers.records == [(("a", 100), 100), (("c", 120), 120), (("b", 200), 200), (("d", 300), 300)]


def test_current_watermark_seen_by_process_element():
    class Probe(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield ctx.timer_service().current_watermark()

    op, out = _keyed_process(Probe(), [0])
    op.process_batch([("a",)], [0])
    op.process_watermark(42)
    op.process_batch([("a",)], [0])
    assert [v for v, _ in out.records] == [MIN, 42]


def test_keyed_state_follows_the_timer_key():
    class Counter(KeyedProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("count", None))

        def process_element(self, value, ctx):
            self.count.update((self.count.value() or 0) + 1)
            ctx.timer_service().register_event_time_timer(100)

        def on_timer(self, timestamp, ctx):
            yield ctx.get_current_key(), self.count.value()

    op, out = _keyed_process(Counter(), [0])
    op.process_batch([("a",), ("b",), ("a",), ("a",)], [1, 2, 3, 4])
    op.process_watermark(100)
    assert sorted(v for v, _ in out.records) == [("a", 3), ("b", 1)]


class Repeating(KeyedProcessFunction):
    """A timer that re-registers itself 10 ms later, three times."""

    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(10)

    def on_timer(self, timestamp, ctx):
        if timestamp < 30:
            ctx.timer_service().register_event_time_timer(timestamp + 10)
        yield timestamp


def test_a_timer_registered_in_on_timer_after_the_watermark_waits_for_the_next_one():
    op, out = _keyed_process(Repeating(), [0])
    op.process_batch([("a",)], [0])
    op.process_watermark(10)
    assert [v for v, _ in out.records] == [10]
    op.process_watermark(15)
    assert [v for v, _ in out.records] == [10]


def test_a_timer_registered_in_on_timer_fires_at_the_next_watermark_that_passes_it():
    op, out = _keyed_process(Repeating(), [0])
    op.process_batch([("a",)], [0])
    for wm in (10, 20, 30, 40):
        op.process_watermark(wm)
    assert [v for v, _ in out.records] == [10, 20, 30]


def test_timers_registered_while_firing_fire_in_the_same_watermark_advance():
    op, out = _keyed_process(Repeating(), [0])
    op.process_batch([("a",)], [0])
    op.process_watermark(MAX)  # the end of a bounded input: nothing comes after it
    assert [v for v, _ in out.records] == [10, 20, 30]


# -- bounded deletion (issue 13, item 9) -------------------------------------------------


def test_registering_and_deleting_far_future_timers_keeps_the_heap_bounded():
    """A session-style pattern: every record moves its key's timeout. Before, each deleted timer stayed
    in the heap until its time came: 20,000 entries for 10 live timers."""
    s = _service()
    for i in range(20_000):
        key = i % 10
        if i >= 10:
            s.delete_processing_time_timer(key, 10**12 + i - 10)
            s.delete_event_time_timer(key, 10**12 + i - 10)
        s.register_processing_time_timer(key, 10**12 + i)
        s.register_event_time_timer(key, 10**12 + i)
    for queue in (s.processing, s.event):
        assert len(queue.live) == 10
        assert len(queue.heap) <= 2 * 64 + 2  # compacted whenever tombstones pass half the heap
    assert s.advance_watermark(MAX) == [(10**12 + i, i % 10) for i in range(19_990, 20_000)]


def test_compaction_keeps_order_and_fires_a_deleted_then_re_registered_timer_once():
    s = _service()
    for i in range(200):
        s.register_event_time_timer("k", i)
    s.delete_event_time_timer("k", 5)
    s.register_event_time_timer("k", 5)  # a second heap entry for the same live timer
    gone = [i for i in range(200) if i % 4 != 1]
    for i in gone:
        s.delete_event_time_timer("k", i)  # tombstones pass half the heap: compacted on the way
        assert len(s.event.heap) <= max(64, 2 * len(s.event.live)) + 1
    assert len(s.event.heap) < 200 - len(gone) + 64
    assert s.advance_watermark(MAX) == [(i, "k") for i in range(1, 200, 4)]
