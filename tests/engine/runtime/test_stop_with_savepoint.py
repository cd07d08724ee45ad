"""Stop-with-savepoint on the task side, on real StreamTasks: sources stop reading at the savepoint's
barrier, tasks finish only once it completes, drain ends event time and no-drain leaves windows
pending in the savepoint, an aborted savepoint resumes reading."""
from __future__ import annotations

import time
from collections import Counter

from millstream.engine.common.time import Time
from millstream.engine.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from millstream.engine.datastream.connectors.datagen import DataGeneratorSource
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from millstream.engine.datastream.window import TumblingEventTimeWindows
from millstream.engine.runtime.checkpointing import Barrier
from tests.engine.progress import idled
from tests.engine.runtime.task_harness import TaskHarness, collect_sink

N = 4000  # events with timestamps 0..N-1, four keys: every 100 ms window holds 25 per key
RATE = 4000  # records per second over both source subtasks: a run takes about a second


def _event(i: int) -> tuple[int, int, int]:
    return (i % 4, i, 1)


def _job(rate: float | None = RATE) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Ts())
    counts = (
        env.from_source(DataGeneratorSource(_event, N, rate), strategy, "events")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(100)))
        .reduce(lambda a, b: (a[0], min(a[1], b[1]), a[2] + b[2]))
        .map(lambda r: (r[0], r[1] // 100, r[2]))
    )
    collect_sink(counts)
    return env


class _Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


def _expected() -> Counter:
    return Counter({(k, w): 1 for k in range(4) for w in range(N // 100)})


def test_barrier_wire_carries_drain_and_old_four_tuples_still_decode() -> None:
    b = Barrier(7, 1000, "/x", "SYNC_SAVEPOINT", True)
    assert Barrier.from_wire(list(b.to_wire())) == b
    old = Barrier.from_wire([7, 1000, "/x", "SYNC_SAVEPOINT"])
    assert old.drain is False and old.is_sync_savepoint


def test_stop_without_drain_leaves_open_windows_in_the_savepoint(tmp_path) -> None:
    first = TaskHarness(_job(), str(tmp_path)).start()
    time.sleep(0.3)
    first.trigger(1, "SYNC_SAVEPOINT", drain=False)
    savepoint = first.await_checkpoint(1)
    idled(first.tasks.values())
    assert first.running() == len(first.tasks), "no task may finish before the savepoint completes"
    first.notify_complete(1)
    before = first.join()
    # Only windows the watermark passed fired: every one of them whole, none fired by the stop.
    assert before and all(c == 25 for _, _, c in before), sorted(r for r in before if r[2] != 25)
    after = TaskHarness(_job(), str(tmp_path), restore_from=savepoint).start().join()
    fired = Counter((k, w) for k, w, _ in before + after)
    assert fired == _expected(), "each window fires exactly once over the stop and the resume"
    assert all(c == 25 for _, _, c in after)


def test_stop_with_drain_fires_every_window_before_finishing(tmp_path) -> None:
    h = TaskHarness(_job(), str(tmp_path)).start()
    time.sleep(0.3)
    h.trigger(1, "SYNC_SAVEPOINT", drain=True)
    h.await_checkpoint(1)
    idled(h.tasks.values())
    assert h.running() == len(h.tasks)
    h.notify_complete(1)
    out = h.join()
    # The second subtask reads timestamps from 2000 on: its windows lie far beyond the combined
    # watermark (held back by the first subtask), so only the end of event time can fire them.
    assert any(w >= 20 for _, w, _ in out), out
    assert len(set((k, w) for k, w, _ in out)) == len(out)
    assert len(out) < len(_expected()), "the stop came before the end of the input"


def test_aborted_stop_with_savepoint_resumes_reading(tmp_path) -> None:
    h = TaskHarness(_job(), str(tmp_path)).start()
    time.sleep(0.2)
    h.trigger(1, "SYNC_SAVEPOINT", drain=False)
    h.await_checkpoint(1)
    src = h.sources[0]
    written = src.metrics.records_out
    idled([src])
    assert src.metrics.records_out == written, "a source reads nothing while its stop-with-savepoint is pending"
    h.notify_aborted(1)
    out = h.join()
    assert Counter((k, w) for k, w, _ in out) == _expected()
    assert all(c == 25 for _, _, c in out)
