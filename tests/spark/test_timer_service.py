"""Flink's BATCH timer semantics on Spark, driven without Spark: one key at a time, timers at the end of each key."""
from __future__ import annotations

import random

from millstream.engine.datastream.functions import KeyedProcessFunction, TimeDomain
from millstream.engine.runtime.watermarks import MAX_WATERMARK, MIN_WATERMARK
from millstream.engine.spark.partitions import TaskInfo, keyed_process_partition, sort_keyed_partition
from millstream.engine.spark.timer_service import BatchTimerService

INFO = TaskInfo(vertex_name="KeyedProcess", operator_name="KeyedProcess", parallelism=1, max_parallelism=128)


def test_end_of_key_fires_event_time_then_processing_time_timers_in_order():
    timers = BatchTimerService(clock=lambda: 1_000)
    for ts in (30, 10, 20, 10):
        timers.register_event_time_timer(ts)
    timers.register_processing_time_timer(5)
    timers.register_processing_time_timer(2)
    timers.delete_event_time_timer(20)
    fired = []
    for ts, domain in timers.end_of_key():
        fired.append((ts, domain, timers.current_watermark()))
        if ts == 10:
            timers.register_event_time_timer(15)  # quiesced: ignored, as in Flink, so no endless loops
            timers.delete_processing_time_timer(5)  # deleting still works
    assert fired == [
        (10, TimeDomain.EVENT_TIME, MAX_WATERMARK),
        (30, TimeDomain.EVENT_TIME, MAX_WATERMARK),
        (2, TimeDomain.PROCESSING_TIME, MAX_WATERMARK),
    ]
    assert timers.current_watermark() == MIN_WATERMARK
    assert list(timers.end_of_key()) == []  # nothing carries over to the next key


class Trace(KeyedProcessFunction):
    def process_element(self, value, ctx):
        if value[1] % 2:
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1000)
        else:
            ctx.timer_service().register_processing_time_timer(ctx.timestamp())
        yield "record", ctx.get_current_key(), ctx.timestamp(), ctx.timer_service().current_watermark()

    def on_timer(self, timestamp, ctx):
        yield "timer", ctx.get_current_key(), timestamp, ctx.time_domain(), ctx.timer_service().current_watermark()


def test_keyed_process_sees_each_key_sorted_by_timestamp_then_its_timers():
    records = [(k, ts) for k in ("x", "y", "z") for ts in range(0, 50, 5)]
    random.Random(1).shuffle(records)
    stamped = [(r, r[1]) for r in records]
    tagged = sorted(sort_keyed_partition(lambda r: r[0], 128, stamped=True, by_timestamp=True)(0, iter(stamped)))
    out = list(keyed_process_partition(Trace(), INFO, stamped_output=True)(0, iter(tagged)))

    runs: list[tuple[str, list]] = []  # consecutive outputs per key
    for (kind, key, *rest), ts in out:
        if not runs or runs[-1][0] != key:
            runs.append((key, []))
        runs[-1][1].append((kind, rest, ts))
    assert sorted(k for k, _ in runs) == ["x", "y", "z"]  # each key once: records, then its timers
    for key, items in runs:
        seen = [rest[0] for kind, rest, _ in items if kind == "record"]
        assert seen == sorted(seen) == list(range(0, 50, 5))  # Flink's BATCH order: by timestamp
        assert all(rest[1] == MIN_WATERMARK for kind, rest, _ in items if kind == "record")
        timers = [(rest[0], rest[1], ts, rest[2]) for kind, rest, ts in items if kind == "timer"]
        assert [kind for kind, _, _ in items] == ["record"] * 10 + ["timer"] * 10
        event = [(t, ts) for t, domain, ts, _ in timers if domain is TimeDomain.EVENT_TIME]
        processing = [(t, ts) for t, domain, ts, _ in timers if domain is TimeDomain.PROCESSING_TIME]
        assert timers[: len(event)] == [(t, TimeDomain.EVENT_TIME, t, MAX_WATERMARK) for t, _ in event]
        assert event == [(t + 1000, t + 1000) for t in (5, 15, 25, 35, 45)]  # output stamped with the timer time
        assert processing == [(t, None) for t in (0, 10, 20, 30, 40)]  # processing-time output has no timestamp
