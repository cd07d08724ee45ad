"""Event time on Spark: the same bounded windowed and timer programs on the native MiniCluster and on Spark.

In BATCH every record is on time (Flink's batch semantics). The programs
below keep the native run on time too (timestamps in order, or no
watermarks before the end), so both engines must agree exactly.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from millstream.engine.common.time import Duration, Time
from millstream.engine.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from millstream.engine.datastream.functions import (
    AggregateFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedProcessFunction,
    ProcessFunction,
    ProcessWindowFunction,
    RuntimeContext,
    WindowFunction,
)
from millstream.engine.datastream.connectors.number_seq import NumberSequenceSource
from millstream.engine.datastream.output_tag import OutputTag
from millstream.engine.datastream.state import ValueStateDescriptor
from millstream.engine.datastream.window import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    EventTimeSessionWindows,
    GlobalWindows,
    SlidingEventTimeWindows,
    TimeEvictor,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from millstream.engine.spark.translator import UntranslatableJob, translate
from millstream.engine.spark.validation import check_job_graph
from tests.spark.conftest import capture, run_native, run_spark

MAX = 2**63 - 1
KEYS = "abcde"


def both(sc: Any, program, parallelism: int = 2) -> tuple[list[Any], list[Any]]:
    native = sorted(run_native(program, parallelism), key=repr)
    spark = sorted(run_spark(sc, program, parallelism), key=repr)
    return native, spark


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


def _events() -> list[tuple[str, int, int]]:
    """(key, amount, timestamp ms), in timestamp order, with bursts and quiet gaps per key."""
    rng = random.Random(7)
    out, ts = [], 1_000
    for i in range(400):
        ts += rng.choice([1, 3, 7, 20, 90])
        out.append((KEYS[rng.randrange(len(KEYS))], rng.randrange(1, 100), ts))
    return out


EVENTS = _events()


def events(env, strategy: WatermarkStrategy | None = None):
    strategy = strategy or WatermarkStrategy.for_monotonous_timestamps()
    return env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy.with_timestamp_assigner(EventTime()))


class WithTimestamp(ProcessFunction):
    """Exposes each record's timestamp, so both engines' output timestamps are compared too."""

    def process_element(self, value, ctx):
        yield value, ctx.timestamp()


class Total(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, acc):
        return acc[0] + value[1], acc[1] + 1

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class Describe(ProcessWindowFunction):
    """(key, start, end, sum, count, sorted amounts) of a whole window (tuples: native collect returns no lists)."""

    def process(self, key, context, elements):
        elements = list(elements)
        w = context.window()
        yield key, w.start, w.end, sum(e[1] for e in elements), len(elements), tuple(sorted(e[1] for e in elements))


class Tagged(ProcessWindowFunction):
    """A window function after reduce/aggregate: the single result with its window."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def process(self, key, context, elements):
        (result,) = elements
        yield self.tag, key, context.window().start, result


class ApplySum(WindowFunction):
    def apply(self, key, window, inputs):
        yield "apply", key, window.start, sum(v[1] for v in inputs)


def test_tumbling_windows_with_every_function_kind(sc):
    def program(env):
        keyed = events(env).map(lambda e: (e[0].upper(), e[1], e[2])).key_by(lambda e: e[0])  # timestamps survive map

        def windowed():
            return keyed.window(TumblingEventTimeWindows.of(Time.milliseconds(250)))

        reduced = windowed().reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2]))).map(lambda r: ("reduce", r))
        aggregated = windowed().aggregate(Total(), Tagged("aggregate"))
        processed = windowed().process(Describe()).map(lambda r: ("process", r))
        applied = windowed().apply(ApplySum())
        reduced_with_fn = windowed().reduce(lambda a, b: (a[0], a[1] + b[1], 0), window_function=Tagged("reduce+fn"))
        return reduced.union(aggregated, processed, applied, reduced_with_fn).process(WithTimestamp())

    native, spark = both(sc, program)
    assert spark == native
    processed = [r for r, _ in spark if r[0] == "process"]
    assert sum(r[1][4] for r in processed) == len(EVENTS)  # every record in exactly one window
    assert all(ts % 250 == 249 for _, ts in spark)  # output timestamp: the window's max_timestamp()


class Mean(AggregateFunction):
    """No merge(): natively only session windows need one, so Spark must not either."""

    def create_accumulator(self):
        return 0, 0

    def add(self, value, acc):
        return acc[0] + value[1], acc[1] + 1

    def get_result(self, acc):
        return acc[0] / acc[1], acc[1]


def test_sliding_aggregate(sc):
    def program(env):
        windowed = (
            events(env, WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(20)))
            .key_by(lambda e: e[0])
            .window(SlidingEventTimeWindows.of(Time.milliseconds(300), Time.milliseconds(100)))
        )
        return windowed.aggregate(Total(), Tagged("sliding")).union(windowed.aggregate(Mean(), Tagged("mean")))

    native, spark = both(sc, program)
    assert spark == native
    assert sum(r[3][1] for r in spark if r[0] == "sliding") == 3 * len(EVENTS)  # each record in size / slide windows
    assert sum(r[3][1] for r in spark if r[0] == "mean") == 3 * len(EVENTS)


def test_session_windows(sc):
    def program(env):
        keyed = events(env).key_by(lambda e: e[0])
        sessions = keyed.window(EventTimeSessionWindows.with_gap(Time.milliseconds(60)))
        described = sessions.process(Describe())
        dynamic = (
            keyed.window(EventTimeSessionWindows.with_dynamic_gap(lambda e: 30 + e[1]))
            .reduce(lambda a, b: (a[0], a[1] + b[1], 0), window_function=Tagged("dynamic"))
        )
        return described.union(dynamic).process(WithTimestamp())

    native, spark = both(sc, program)
    assert spark == native
    fixed = [r for r, _ in spark if r[0] in KEYS]
    assert sum(r[4] for r in fixed) == len(EVENTS)
    assert all(end - start >= 60 for _, start, end, *_ in fixed)
    assert any(r[4] > 1 for r in fixed) and any(r[4] == 1 for r in fixed)  # sessions merged, and lone ones


def test_count_windows(sc):
    class Elements(ProcessWindowFunction):
        def process(self, key, context, elements):
            yield key, tuple(e[1] for e in elements)  # input order matters here

    def program(env):
        keyed = env.from_collection(EVENTS).key_by(lambda e: e[0])  # one source partition: input order is defined
        tumbling = keyed.count_window(3).reduce(lambda a, b: (a[0], a[1] + b[1], 0)).map(lambda r: ("tumbling", r))
        sliding = keyed.count_window(4, 2).process(Elements()).map(lambda r: ("sliding", r))
        triggered = keyed.window(GlobalWindows.create()).trigger(CountTrigger.of(5)).aggregate(Total())
        triggered = triggered.map(lambda r: ("global", r))
        return tumbling.union(sliding, triggered)

    native, spark = both(sc, program)
    assert spark == native
    per_key = {k: [e[1] for e in EVENTS if e[0] == k] for k in KEYS}
    sliding = sorted(r for tag, r in spark if tag == "sliding")
    expected = sorted((k, tuple(v[n - 4 : n])) for k, v in per_key.items() for n in range(4, len(v) + 1, 2))
    assert sliding == expected  # PyFlink's sliding count windows: elements 0-3, 2-5, ... each once, when full
    assert sum(1 for tag, _ in spark if tag == "tumbling") == sum(len(v) // 3 for v in per_key.values())


class TimerTotals(KeyedProcessFunction):
    """A timer 50 ms after each record; at end of input every timer sees the key's final total."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total"))

    def process_element(self, value, ctx):
        self.total.update((self.total.value() or 0) + value[1])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 50)
        yield "record", ctx.get_current_key(), value[1], ctx.timestamp()

    def on_timer(self, timestamp, ctx):
        yield "timer", ctx.get_current_key(), timestamp, self.total.value(), ctx.timestamp(), ctx.time_domain().name


def test_keyed_process_event_time_timers_fire_at_end_of_key(sc):
    shuffled = EVENTS[:]
    random.Random(3).shuffle(shuffled)

    def program(env):
        # No watermarks before the end: natively too, every timer fires once all records are in.
        strategy = WatermarkStrategy.no_watermarks().with_timestamp_assigner(EventTime())
        stream = env.from_collection(shuffled).assign_timestamps_and_watermarks(strategy)
        return stream.key_by(lambda e: e[0]).process(TimerTotals()).process(WithTimestamp())

    native, spark = both(sc, program)
    assert spark == native
    timers = [r for r, _ in spark if r[0] == "timer"]
    assert len(timers) == len({(e[0], e[2] + 50) for e in EVENTS})  # one timer per (key, time)
    totals = {k: sum(e[1] for e in EVENTS if e[0] == k) for k in KEYS}
    assert all(r[3] == totals[r[1]] and r[4] == r[2] and r[5] == "EVENT_TIME" for r in timers)
    assert all(ts == r[2] for r, ts in spark if r[0] == "timer")  # timer output carries the timer's time


def test_no_lateness_in_batch_late_side_output_is_empty(sc):
    """Out-of-order data beyond the watermark bound: in BATCH (Flink's semantics) nothing is late."""
    late = OutputTag("late")
    disordered = [("k", 1, 5_000), ("k", 1, 100), ("k", 1, 150), ("k", 1, 5_100), ("k", 1, 120)]

    def program(env):
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(EventTime())
        windowed = (
            env.from_collection(disordered)
            .assign_timestamps_and_watermarks(strategy)
            .key_by(lambda e: e[0])
            .window(TumblingEventTimeWindows.of(Time.seconds(1)))
            .allowed_lateness(0)
            .side_output_late_data(late)
            .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])), window_function=AtEnd())
        )
        return windowed.union(windowed.get_side_output(late).map(lambda e: ("late", e)))

    # every window fires once, at the end of input: the watermark is at its maximum then
    assert sorted(run_spark(sc, program)) == [(("k", 2, 5_100), MAX), (("k", 3, 150), MAX)]


class AtEnd(ProcessWindowFunction):
    def process(self, key, context, elements):
        (result,) = elements
        yield result, context.current_watermark()


def test_timestamps_must_be_int_milliseconds(sc):
    def program(env):
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[2] / 1000)
        stream = env.from_collection(EVENTS[:10]).assign_timestamps_and_watermarks(strategy)
        return stream.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(lambda a, b: a)

    with pytest.raises(Exception, match="timestamps must be int epoch milliseconds"):
        run_spark(sc, program)


def _keyed(env):
    return events(env).key_by(lambda e: e[0])


@pytest.mark.parametrize(
    "build, refused",
    [
        (
            lambda env: _keyed(env)
            .window(TumblingEventTimeWindows.of(Time.seconds(1)))
            .trigger(ContinuousEventTimeTrigger.of(Time.milliseconds(100)))
            .reduce(lambda a, b: a),
            "the trigger ContinuousEventTimeTrigger is not translated",
        ),
        (
            lambda env: _keyed(env)
            .window(GlobalWindows.create())
            .trigger(CountTrigger.of(2))
            .evictor(TimeEvictor.of(10))
            .reduce(lambda a, b: a),
            "the evictor TimeEvictor is not translated",
        ),
        (
            lambda env: _keyed(env).window(TumblingProcessingTimeWindows.of(Time.seconds(1))).reduce(lambda a, b: a),
            "TumblingProcessingTimeWindows assigns by the wall clock",
        ),
    ],
    ids=["trigger", "evictor", "processing-time"],
)
def test_untranslatable_windows_are_refused_by_name(sc, build, refused):
    job_graph, stream_graph = capture(build)
    message = rf"operator 'Window\(.*\)' cannot run on Spark: {refused}"
    with pytest.raises(UntranslatableJob, match=message):
        check_job_graph(job_graph)  # at submission, from the JobGraph's window descriptor alone
    # A JobGraph whose descriptor claims a translatable window is still refused by the real objects.
    with pytest.raises(UntranslatableJob, match=message):
        translate(sc, _claiming_plain_tumbling_windows(job_graph), stream_graph)


def _claiming_plain_tumbling_windows(job_graph):
    honest = capture(lambda env: _keyed(env).window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(max))[0]
    (plain,) = [op.window for v in honest.vertices for op in v.operators if op.window is not None]
    vertices = tuple(
        dataclasses.replace(
            v, operators=tuple(dataclasses.replace(op, window=plain) if op.window else op for op in v.operators)
        )
        for v in job_graph.vertices
    )
    lying = dataclasses.replace(job_graph, vertices=vertices)
    check_job_graph(lying)
    return lying


def test_co_map_and_co_flat_map_on_connected_streams(sc):
    class Label(CoMapFunction):
        def map1(self, value):
            return "event", value[0], value[1]

        def map2(self, value):
            return "number", value, None

    class Explode(CoFlatMapFunction):
        def flat_map1(self, value):
            yield from ((value[0], i) for i in range(value[1] % 3))

        def flat_map2(self, value):
            return [(str(value), value)] if value % 2 else None

    def program(env):
        numbers = env.from_source(NumberSequenceSource(1, 60), None, "numbers")
        plain = env.from_collection(EVENTS).connect(numbers).map(Label())
        keyed = env.from_collection(EVENTS).connect(numbers).key_by(lambda e: e[0], lambda n: str(n % 5))
        # timestamps reach a window through flat_map1; numbers get none but are keyed away from it
        stamped = events(env).connect(numbers.filter(lambda n: n > 1000)).flat_map(Explode())
        windowed = stamped.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(Time.seconds(1))).process(
            CountPerWindow()
        )
        return plain.union(keyed.flat_map(Explode()).map(lambda r: ("keyed",) + r), windowed)

    native, spark = both(sc, program)
    assert spark == native
    assert sum(1 for r in spark if r[0] == "number") == 60 and sum(1 for r in spark if r[0] == "event") == len(EVENTS)
    assert sum(r[3] for r in spark if r[0] == "window") == sum(e[1] % 3 for e in EVENTS)


class CountPerWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield "window", key, context.window().start, len(list(elements))


def test_stateful_two_input_operators_and_other_side_outputs_are_refused():
    class Both(CoProcessFunction):
        def process_element1(self, value, ctx):
            yield value

        def process_element2(self, value, ctx):
            yield value

    job_graph, _ = capture(lambda env: env.from_collection([1, 2]).connect(env.from_collection([3])).process(Both()))
    with pytest.raises(UntranslatableJob, match="'CoProcess' cannot run on Spark: CoProcess is a two-input operator"):
        check_job_graph(job_graph)

    tag = OutputTag("odd")

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            yield (tag, value) if value % 2 else value

    job_graph, _ = capture(lambda env: env.from_collection([1, 2]).process(Split()).get_side_output(tag))
    with pytest.raises(UntranslatableJob, match="side output 'odd' is not translated yet"):
        check_job_graph(job_graph)
