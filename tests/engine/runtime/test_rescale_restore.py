"""End to end on real StreamTasks: stop a job with a savepoint, restore it at another parallelism,
and get exactly the output of an uninterrupted run. Source splits, keyed MapState, event-time
timers of a KeyedProcessFunction and (key, window) timers of a window operator all cross the rescale."""
from __future__ import annotations

import time
from collections import Counter

import pytest

from millstream.engine.common.time import Time
from millstream.engine.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from millstream.engine.datastream.connectors.datagen import DataGeneratorSource
from millstream.engine.datastream.functions import KeyedProcessFunction, ProcessWindowFunction, RuntimeContext
from millstream.engine.datastream.state import MapStateDescriptor, ValueStateDescriptor
from millstream.engine.datastream.state_backend import EmbeddedRocksDBStateBackend
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from millstream.engine.datastream.window import TumblingEventTimeWindows
from tests.engine.runtime.task_harness import TaskHarness, collect_sink

N = 4000
KEYS = 7
RATE = 4000  # records/s over all source subtasks


def _event(i: int) -> tuple[int, int]:
    return (i % KEYS, i * 5)  # (key, timestamp ms): 20 seconds of event time


class _Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class PerSecond(KeyedProcessFunction):
    """Counts each key's events per second in MapState; a timer at the second's end emits the count."""

    def open(self, runtime_context: RuntimeContext) -> None:
        self.counts = runtime_context.get_map_state(MapStateDescriptor("per_second", None, None))

    def process_element(self, value, ctx):
        sec = value[1] // 1000
        self.counts.put(sec, (self.counts.get(sec) or 0) + 1)
        ctx.timer_service().register_event_time_timer(sec * 1000 + 999)

    def on_timer(self, timestamp, ctx):
        sec = timestamp // 1000
        yield ("timer", ctx.get_current_key(), sec, self.counts.get(sec))
        self.counts.remove(sec)


class CountWindow(ProcessWindowFunction):
    """Also numbers each key's windows in global state: every key has events in every second,
    so window n of a key is second n, across the rescale too."""

    def process(self, key, context, elements):
        fired = context.global_state().get_state(ValueStateDescriptor("fired", None))
        fired.update((fired.value() or 0) + 1)
        yield ("window", key, context.window().start // 1000, len(list(elements)), fired.value())


def _job(parallelism: int, on_disk: bool = False) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    if on_disk:
        env.set_state_backend(EmbeddedRocksDBStateBackend())
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts())
    events = env.from_source(DataGeneratorSource(_event, N, RATE), strategy, "events")
    keyed = events.key_by(lambda e: e[0])
    collect_sink(keyed.process(PerSecond()).uid("per-second"))
    collect_sink(keyed.window(TumblingEventTimeWindows.of(Time.seconds(1))).process(CountWindow()).uid("windows"))
    return env


def _expected() -> Counter:
    per: Counter = Counter()
    for i in range(N):
        k, ts = _event(i)
        per[(k, ts // 1000)] += 1
    out: Counter = Counter()
    for (k, sec), c in per.items():
        out[("timer", k, sec, c)] += 1
        out[("window", k, sec, c, sec + 1)] += 1
    return out


@pytest.mark.parametrize(
    ("before", "after", "on_disk", "on_disk_after"),
    # the last three cross backends: a savepoint restores on either backend (issue 16)
    [(2, 3, False, False), (3, 1, False, False), (2, 3, True, True), (3, 1, True, True), (2, 3, False, True), (3, 2, True, False)],
)
def test_stop_with_savepoint_and_resume_at_another_parallelism_gives_an_uninterrupted_result(
    tmp_path, before, after, on_disk, on_disk_after
) -> None:
    first = TaskHarness(_job(before, on_disk), str(tmp_path)).start()
    time.sleep(0.4)
    first.trigger(1, "SYNC_SAVEPOINT", drain=False)
    savepoint = first.await_checkpoint(1)
    first.notify_complete(1)
    part1 = first.join()
    # The savepoint really cut the run in the middle, with timers and windows pending in it.
    assert 0 < len(part1) < sum(_expected().values())
    second = TaskHarness(_job(after, on_disk_after), str(tmp_path), restore_from=savepoint)
    assert all(t.tdd.parallelism == after for t in second.tasks.values())
    part2 = second.start().join()
    assert Counter(part1) + Counter(part2) == _expected()


@pytest.mark.parametrize("drain", [False, True])
def test_a_stop_with_savepoint_restored_after_a_jobmanager_death_finishes_as_the_stop_would_have(tmp_path, drain) -> None:
    """The stop's savepoint completed but the JobManager died before the tasks heard of it. Restored
    (at another parallelism) with that savepoint's barrier, the tasks read nothing more and end,
    emitting exactly what the stopped job emitted once it heard: with drain the pending windows and
    timers fire, without drain nothing does."""
    first = TaskHarness(_job(2), str(tmp_path)).start()
    time.sleep(0.4)
    barrier = first.trigger(1, "SYNC_SAVEPOINT", drain=drain)
    savepoint = first.await_checkpoint(1)
    before = list(first.results)
    assert 0 < len(before) < sum(_expected().values())
    first.notify_complete(1)  # the run without a JobManager death, for reference
    after_stop = Counter(first.join()) - Counter(before)
    second = TaskHarness(_job(3), str(tmp_path), restore_from=savepoint, finish_barrier=barrier).start()
    finished = second.join()
    assert not second.failures and second.running() == 0
    assert Counter(finished) == after_stop
    assert bool(finished) == drain


@pytest.mark.parametrize("on_disk", [False, True])
def test_a_checkpoint_then_failover_restored_at_one_keeps_every_record_exactly_once(tmp_path, on_disk) -> None:
    """A plain checkpoint (the job goes on after it), the job dies, and a restore rescaled 2 -> 1:
    output covered by the checkpoint plus everything the restored run produces is exactly one run."""
    first = TaskHarness(_job(2, on_disk), str(tmp_path)).start()
    time.sleep(0.3)
    done = first.checkpoint(1)
    time.sleep(0.2)
    first.cancel()
    covered = first.output_before(1)
    assert covered, "the checkpoint came after some output"
    part2 = TaskHarness(_job(1, on_disk), str(tmp_path), restore_from=done).start().join()
    assert Counter(covered) + Counter(part2) == _expected()


def test_an_unbounded_source_subtask_left_without_splits_does_not_hold_back_event_time(tmp_path) -> None:
    """2 -> 3 with two splits: the third source subtask has nothing to read and says it is idle,
    so windows downstream go on firing with the other two."""
    def job(parallelism: int) -> StreamExecutionEnvironment:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(parallelism)
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts())
        events = env.from_source(DataGeneratorSource(_event, None, RATE), strategy, "events")
        keyed = events.key_by(lambda e: e[0])
        collect_sink(keyed.window(TumblingEventTimeWindows.of(Time.seconds(1))).process(CountWindow()))
        return env

    first = TaskHarness(job(2), str(tmp_path)).start()
    time.sleep(0.3)
    first.trigger(1, "SYNC_SAVEPOINT")
    savepoint = first.await_checkpoint(1)
    first.notify_complete(1)
    first.join()
    second = TaskHarness(job(3), str(tmp_path), restore_from=savepoint).start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(second.results) < 3 * KEYS:
            time.sleep(0.05)
        assert len(second.results) >= 3 * KEYS, "windows stopped firing after the rescale"
    finally:
        second.cancel()
