"""TimestampsAndWatermarksOperator driven directly with a fake clock: stamps, watermarks and idleness."""
from __future__ import annotations

from typing import Any

import pytest

from millstream.engine.common.time import Duration
from millstream.engine.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from millstream.engine.runtime.operators.base import OperatorContext
from millstream.engine.runtime.operators.timestamps import AUTO_WATERMARK_INTERVAL_MS, TimestampsAndWatermarksOperator
from millstream.engine.runtime.watermarks import MAX_WATERMARK
from tests.operator_context import keyed_context


class Collect:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []  # in arrival order, to check what precedes what

    def emit(self, values, timestamps) -> None:
        self.events.append(("records", (list(values), None if timestamps is None else list(timestamps))))

    def emit_watermark(self, watermark) -> None:
        self.events.append(("watermark", watermark))

    def emit_status(self, idle) -> None:
        self.events.append(("idle", idle))

    def of(self, kind: str) -> list[Any]:
        return [e for k, e in self.events if k == kind]


def _operator(
    strategy: WatermarkStrategy, now: list[int]
) -> tuple[TimestampsAndWatermarksOperator, Collect, OperatorContext]:
    ctx = keyed_context("Timestamps/Watermarks", lambda: now[0])
    op = TimestampsAndWatermarksOperator(None, ctx, {"watermark_strategy": strategy})
    out = Collect()
    op.output = out
    op.open()
    return op, out, ctx


def _bounded(ms: int) -> WatermarkStrategy:
    return WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(ms)).with_timestamp_assigner(
        lambda e, prev: e[1]
    )


def test_records_are_stamped_and_a_watermark_follows_the_batch():
    op, out, ctx = _operator(_bounded(100), [0])
    op.process_batch([("a", 1000), ("b", 1500), ("c", 1200)], None)
    assert out.events == [
        ("records", ([("a", 1000), ("b", 1500), ("c", 1200)], [1000, 1500, 1200])),
        ("watermark", 1399),  # max 1500 - bound 100 - 1
    ]
    assert ctx.metrics.current_output_watermark == 1399


def test_a_watermark_is_emitted_only_when_it_advanced():
    op, out, _ = _operator(_bounded(100), [0])
    op.process_batch([("a", 1000)], None)
    op.process_batch([("a", 900), ("b", 1000)], None)  # out of order: no new watermark
    op.process_batch([("a", 1001)], None)
    assert out.of("watermark") == [899, 900]
    assert len(out.of("records")) == 3


def test_monotonous_timestamps_give_max_minus_one():
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, prev: e)
    op, out, _ = _operator(strategy, [0])
    op.process_batch([5, 7, 6], None)
    op.process_batch([-3], None)
    assert out.of("watermark") == [6]


def test_a_timestamp_assigner_object_gets_the_previous_timestamp():
    class FromRecord(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return record_timestamp + value

    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(FromRecord())
    op, out, _ = _operator(strategy, [0])
    op.process_batch([1, 2], [100, 200])
    assert out.of("records") == [([1, 2], [101, 202])]
    assert out.of("watermark") == [201]


def test_upstream_watermarks_are_replaced_except_the_final_one():
    op, out, _ = _operator(_bounded(0), [0])
    op.process_batch([("a", 10)], None)
    op.process_watermark(5000)
    op.process_watermark(-5)
    assert out.of("watermark") == [9]
    op.process_watermark(MAX_WATERMARK)
    assert out.of("watermark") == [9, MAX_WATERMARK]
    op.process_batch([("a", 10**12)], None)  # nothing may follow the final watermark
    op.on_tick(10**6)
    assert out.of("watermark") == [9, MAX_WATERMARK]


def test_a_bounded_strategy_without_an_assigner_on_unstamped_records_is_a_clear_type_error():
    op, _, _ = _operator(WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)), [0])
    with pytest.raises(TypeError, match=r"'Timestamps/Watermarks': records carry no timestamps; .*with_timestamp_assigner"):
        op.process_batch([("a", 1)], None)


def test_without_an_assigner_upstream_timestamps_drive_the_watermark():
    op, out, _ = _operator(WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(10)), [0])
    op.process_batch(["x", "y"], [100, 50])
    assert out.of("records") == [(["x", "y"], [100, 50])]
    assert out.of("watermark") == [89]


def test_no_watermarks_strategy_only_stamps():
    strategy = WatermarkStrategy.no_watermarks().with_timestamp_assigner(lambda e, prev: e)
    op, out, _ = _operator(strategy, [0])
    op.process_batch([3, 1], None)
    op.on_tick(10_000)
    assert out.events == [("records", ([3, 1], [3, 1]))]


def test_a_bad_timestamp_names_the_operator():
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, prev: e / 2)
    op, out, _ = _operator(strategy, [0])
    with pytest.raises(TypeError, match=r"'Timestamps/Watermarks' returned 1\.5 \(float\)"):
        op.process_batch([3], None)
    assert out.events == []


def test_periodic_tick_emits_nothing_new_without_records():
    op, out, _ = _operator(_bounded(0), [0])
    op.process_batch([("a", 10)], None)
    op.on_tick(AUTO_WATERMARK_INTERVAL_MS * 10)
    assert out.of("watermark") == [9]


# -- idleness -----------------------------------------------------------------------------


def _idle_after(ms: int) -> WatermarkStrategy:
    return _bounded(0).with_idleness(Duration.of_millis(ms))


def test_with_idleness_a_quiet_subtask_declares_itself_idle_once():
    now = [1000]
    op, out, _ = _operator(_idle_after(500), now)
    op.process_batch([("a", 1)], None)
    now[0] = 1499
    op.on_tick(1499)
    assert out.of("idle") == []
    now[0] = 1500
    op.on_tick(1500)
    assert out.of("idle") == [True]
    op.on_tick(1800)
    op.on_tick(5000)
    assert out.of("idle") == [True]


def test_the_next_record_after_idleness_marks_the_stream_active_before_the_records():
    now = [0]
    op, out, _ = _operator(_idle_after(100), now)
    op.on_tick(100)  # idle even before the first record
    now[0] = 150
    op.process_batch([("a", 7)], None)
    assert out.events == [("idle", True), ("idle", False), ("records", ([("a", 7)], [7])), ("watermark", 6)]
    now[0] = 249
    op.on_tick(249)
    assert out.of("idle") == [True, False]
    op.on_tick(250)
    assert out.of("idle") == [True, False, True]


def test_without_idleness_configured_a_subtask_never_goes_idle():
    op, out, _ = _operator(_bounded(0), [0])
    op.on_tick(10**9)
    assert out.of("idle") == []
    assert op.wants_ticks
