"""CheckpointedFunction on real StreamTasks: a SourceFunction keeps its offset in operator list state
(under the checkpoint lock), a two-phase-commit SinkFunction keeps its pre-committed records in list
state and commits them on notify_checkpoint_complete. The job dies after a checkpoint was acked by
every task but before anyone heard it completed, and is restored with the sink at another parallelism:
every record is committed exactly once."""
from __future__ import annotations

import os
import time
import uuid
from collections import Counter

import pytest

from millstream.engine.datastream.connectors.source_function import SourceFunction
from millstream.engine.datastream.functions import CheckpointedFunction, CheckpointListener, RuntimeContext, SinkFunction
from millstream.engine.datastream.state import ListStateDescriptor
from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
from tests.engine.runtime.task_harness import TaskHarness

N = 3000


class Numbers(SourceFunction, CheckpointedFunction):
    """0..N-1, then idles until cancelled; its next offset is operator state."""

    def __init__(self) -> None:
        self.next = 0
        self.running = True

    def initialize_state(self, context):
        self.offset = context.get_operator_state_store().get_list_state(ListStateDescriptor("next", None))
        for v in self.offset.get():
            self.next = v

    def snapshot_state(self, context):
        self.offset.update([self.next])

    def run(self, ctx):
        while self.running:
            if self.next >= N:
                time.sleep(0.01)
                continue
            with ctx.get_checkpoint_lock():
                ctx.collect(self.next)
                self.next += 1
            if self.next % 100 == 0:
                time.sleep(0.01)  # about 10,000 records/s: checkpoints land mid-stream

    def cancel(self):
        self.running = False


class Committing(SinkFunction, CheckpointedFunction, CheckpointListener):
    """Pre-commits at each checkpoint; writes a checkpoint's records to a file when it completes."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def open(self, runtime_context: RuntimeContext) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("staged", None))
        self.pending: list[int] = []
        self.staged: dict[int, list[int]] = {}
        restored = list(self.state.get())
        if context.is_restored():
            # Pre-committed by the checkpoint we resume from, whose completion nobody may have heard.
            self._write("restored", [v for _, v in restored])
        self.staged_state: list = []

    def invoke(self, value, context):
        self.pending.append(value)

    def snapshot_state(self, context):
        cid = context.get_checkpoint_id()
        self.staged[cid], self.pending = self.pending, []
        self.state.update([[c, v] for c in sorted(self.staged) for v in self.staged[c]])

    def notify_checkpoint_complete(self, checkpoint_id):
        for cid in sorted(c for c in self.staged if c <= checkpoint_id):
            self._write(str(cid), self.staged.pop(cid))

    def _write(self, label: str, values: list[int]) -> None:
        if values:
            path = os.path.join(self.directory, f"{label}-{self.subtask}-{uuid.uuid4().hex}.txt")
            with open(path, "w") as f:
                f.write("\n".join(map(str, values)))


def _job(directory: str, sink_parallelism: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.add_source(Numbers(), "numbers").rebalance().add_sink(Committing(directory)).set_parallelism(sink_parallelism)
    return env


def _committed(directory: str) -> Counter:
    out: Counter = Counter()
    for name in os.listdir(directory):
        with open(os.path.join(directory, name)) as f:
            out.update(int(x) for x in f.read().split())
    return out


def _pending(h: TaskHarness) -> int:
    return sum(len(getattr(op.function, "pending", ())) for t in h.tasks.values() for op in t.operators.values())


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1)])
def test_source_and_sink_operator_state_survive_a_failover_rescaled(tmp_path, before, after) -> None:
    out = tmp_path / "out"
    out.mkdir()
    first = TaskHarness(_job(str(out), before), str(tmp_path / "chk")).start()
    time.sleep(0.1)
    first.checkpoint(1)  # completes and commits
    time.sleep(0.05)
    first.trigger(2)
    pending = first.await_checkpoint(2)  # every task acked ...
    first.cancel()  # ... and the job died before the completion was heard: nothing of 2 is committed
    assert 0 < sum(_committed(str(out)).values()) < N
    second = TaskHarness(_job(str(out), after), str(tmp_path / "chk"), restore_from=pending).start()
    deadline = time.monotonic() + 20
    while sum(_committed(str(out)).values()) + _pending(second) < N and time.monotonic() < deadline:
        time.sleep(0.02)
    second.trigger(3, "SYNC_SAVEPOINT")
    second.await_checkpoint(3)
    second.notify_complete(3)
    second.join()
    assert _committed(str(out)) == Counter(range(N))


class Fast(Numbers):
    def run(self, ctx):
        while self.running:
            with ctx.get_checkpoint_lock():
                ctx.collect(self.next)
                self.next += 1


def test_a_source_function_snapshot_agrees_with_the_records_emitted_before_it() -> None:
    """Under the checkpoint lock the queue is drained (those records go before the barrier) and the
    offset snapshotted: records handed out so far are exactly 0..offset-1, even with a full queue."""
    from millstream.engine.datastream.connectors.source_function import SourceFunctionSource

    reader = SourceFunctionSource(Fast()).create_reader(0, 1, None)
    reader.initialize_function_state(None, None)
    seen: list[int] = []
    for cid in range(1, 6):
        seen.extend(reader.poll_batch(500) or [])
        time.sleep(0.02)  # the user's thread fills the queue meanwhile
        seen.extend(reader.prepare_snapshot())
        try:
            state = reader.snapshot_function_state(cid, 0)
        finally:
            reader.finish_snapshot()
        assert reader.snapshot() == []  # a SourceFunction has no splits
        (offset,) = state["list"]["next"]
        assert seen == list(range(offset)), f"checkpoint {cid}: emitted and snapshotted offset disagree"
    reader.close()


class SlowSnapshot(SinkFunction, CheckpointedFunction):
    """Its synchronous snapshot takes 80 ms on the task thread."""

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("s", None))

    def invoke(self, value, context):
        pass

    def snapshot_state(self, context):
        time.sleep(0.08)
        self.state.update([context.get_checkpoint_id()])


def test_the_synchronous_duration_counts_the_operators_snapshots(tmp_path) -> None:
    """Flink's sync duration is the operators' snapshots on the task thread (the REST checkpoint
    details report it as the task-thread pause); it left them out, so an on-disk backend's barrier
    work showed as 0 ms."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.add_source(Numbers(), "numbers").add_sink(SlowSnapshot()).set_parallelism(1)
    h = TaskHarness(env, str(tmp_path / "chk")).start()
    try:
        time.sleep(0.1)
        h.checkpoint(1)
        sink = [ack for (vertex, _), ack in h.acks[1].items() if "Sink" in h.tasks[(vertex, 0)].name]
        assert sink and sink[0].sync_ms >= 80, [(t, a.sync_ms) for t, a in h.acks[1].items()]
    finally:
        h.cancel()


@pytest.mark.parametrize("periodic", [True, False])
def test_a_task_of_a_checkpointed_job_starts_its_writer_before_the_first_barrier(tmp_path, periodic: bool) -> None:
    """Started by the first checkpoint, the writer thread's start (it waits for the new thread to run)
    was in that checkpoint's synchronous part: the slowest pause of the large-state runs."""
    from tests.engine.progress import until

    env = StreamExecutionEnvironment.get_execution_environment()
    if periodic:
        env.enable_checkpointing(60_000)
    env.add_source(Numbers(), "numbers").add_sink(SlowSnapshot()).set_parallelism(1)
    h = TaskHarness(env, str(tmp_path / "chk")).start()
    try:
        tasks = list(h.tasks.values())
        if periodic:  # the thread runs already, not only the executor
            until(lambda: all(t.checkpointer._writer is not None and len(t.checkpointer._writer._threads) == 1 for t in tasks),
                  what="the writer threads")
        else:
            time.sleep(0.3)
            assert all(t.checkpointer._writer is None for t in tasks)
        assert not h.acks  # no checkpoint was taken
    finally:
        h.cancel()
