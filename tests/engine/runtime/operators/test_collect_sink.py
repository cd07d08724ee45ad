"""The collect sink on its own: positions, commits on checkpoint completion, restore, end of input."""
from __future__ import annotations

from typing import Any

from millstream.engine.client.collect_result_buffer import CollectResultBuffer
from millstream.engine.runtime import collect
from millstream.engine.runtime.operators.base import OperatorContext
from millstream.engine.runtime.operators.sinks import CollectSinkOperator
from millstream.engine.runtime.io.serialization import MsgpackSerializer
from millstream.engine.runtime.task_metrics import TaskIOMetrics

SER = MsgpackSerializer()


class Recording:
    """A gateway that records what the sink publishes; ``acks`` plays the client's acknowledgements."""

    def __init__(self, gated: bool, replays: bool = False) -> None:
        self.gated = gated
        self.replays = replays
        self.entries: list[collect.CollectEntry] = []
        self.acks: dict[int, int] = {}
        self.waited_for: list[int] = []
        self.looked = 0  # reads of the client's acknowledgement (each a Redis round trip for real)

    def publish(self, entries: list[collect.CollectEntry]) -> None:
        self.entries.extend(collect.CollectEntry.decode(e.encode(SER), SER) for e in entries)  # as the client gets them

    def acknowledged(self, attempt: int) -> int:
        self.looked += 1
        return self.acks.get(attempt, 0)

    def await_acknowledged(self, attempt: int, position: int) -> int:
        self.waited_for.append(position)
        # The client reads while the sink waits: it acknowledges everything written so far.
        self.acks[attempt] = max(e.seq + len(e.values) for e in self.entries if e.kind == collect.RECORDS)
        return self.acks[attempt]


def sink(gateway: Recording, attempt: int = 0) -> CollectSinkOperator:
    ctx = OperatorContext(
        job_id="j", task_name="t", operator_name="Collect Sink", subtask=0, parallelism=1, max_parallelism=128,
        attempt=attempt, job_type="STREAMING", metrics=TaskIOMetrics(), collect=gateway,
    )
    op = CollectSinkOperator(None, ctx, {"sink": "collect", "node_id": 9})
    op.open()
    return op


def test_gated_sink_commits_what_a_completed_checkpoint_covers_and_a_restore_resumes_there() -> None:
    gw = Recording(gated=True)
    op = sink(gw)
    op.process_batch(list(range(5)), None)
    op.prepare_snapshot_pre_barrier(1)
    state = op.snapshot_state()
    op.process_batch([5, 6], None)
    op.prepare_snapshot_pre_barrier(2)
    op.notify_checkpoint_aborted(2)
    op.notify_checkpoint_complete(1)
    assert [(e.kind, e.seq) for e in gw.entries] == [
        (collect.START, 0), (collect.RECORDS, 0), (collect.RECORDS, 5), (collect.COMMIT, 5)
    ]
    # Attempt 1 restores checkpoint 1: positions 5 and 6 are written again, the client sees them once.
    restored = sink(gw, attempt=1)
    restored.restore_state(state)
    restored.process_batch([5, 6, 7], None)
    restored.end_input()
    assert gw.entries[-1] == collect.end(1, 8)
    buf = CollectResultBuffer()
    assert list(buf.add(gw.entries)) == list(range(8))


def test_ungated_sink_hands_records_out_at_once_in_entries_of_bounded_size() -> None:
    gw = Recording(gated=False)
    op = sink(gw)
    op.process_batch(list(range(2500)), None)
    records = [e for e in gw.entries if e.kind == collect.RECORDS]
    assert [len(e.values) for e in records] == [1024, 1024, 452]
    assert [e.seq for e in records] == [0, 1024, 2048]
    op.prepare_snapshot_pre_barrier(1)
    op.notify_checkpoint_complete(1)
    assert not any(e.kind == collect.COMMIT for e in gw.entries)  # nothing to gate
    assert list(CollectResultBuffer().add(gw.entries)) == list(range(2500))


def test_collect_sink_needs_a_gateway() -> None:
    ctx = OperatorContext(
        job_id="j", task_name="t", operator_name="Collect Sink", subtask=0, parallelism=1, max_parallelism=128,
        attempt=0, job_type="STREAMING", metrics=TaskIOMetrics(),
    )
    op: Any = CollectSinkOperator(None, ctx, {"sink": "collect", "node_id": 1})
    try:
        op.open()
    except RuntimeError as e:
        assert "cannot collect" in str(e)
    else:
        raise AssertionError("open() without a gateway should fail")


def test_a_replaying_sink_keeps_unacknowledged_records_in_its_checkpoint_and_writes_them_again() -> None:
    """A Redis restart loses every entry after the first START: the restored attempt's START and its
    kept records give the client all of them, exactly once."""
    lost = Recording(gated=True, replays=True)
    op = sink(lost)
    op.process_batch(["a", "b"], None)
    lost.acks[0] = 1  # the client holds "a"
    op.process_batch(["c"], None)
    op.prepare_snapshot_pre_barrier(1)
    state = op.snapshot_state()
    assert [(p, n) for p, n, _ in state["kept"]] == [(0, 2), (2, 1)]  # kept whole entries from "a"'s
    op.process_batch(["d"], None)
    op.notify_checkpoint_complete(1)
    client = CollectResultBuffer()
    assert list(client.add(lost.entries[:2])) == []  # START and RECORDS(a, b); the rest is lost
    again = Recording(gated=True, replays=True)
    restored = sink(again, attempt=1)
    restored.restore_state(state)
    restored.process_batch(["d'"], None)
    restored.end_input()
    assert again.entries[0] == collect.start(1, 3, True, 0)
    assert list(client.add(again.entries)) == ["a", "b", "c", "d'"]


def test_a_full_sink_waits_for_its_client_instead_of_dropping() -> None:
    gw = Recording(gated=False, replays=True)
    op = sink(gw)
    op.max_kept_bytes = 40
    for i in range(10):
        op.process_batch(["x" * 10], None)
    assert gw.waited_for  # it waited for acknowledgements, each time for the oldest kept records
    assert op.kept_bytes <= 40 + len(op.kept[-1][2]) and len(op.kept) < 10
    assert list(CollectResultBuffer().add(gw.entries)) == ["x" * 10] * 10


def test_a_job_restored_from_a_savepoint_does_not_replay_the_old_jobs_records() -> None:
    old = sink(Recording(gated=True, replays=True))
    old.process_batch([1, 2, 3], None)
    state = old.snapshot_state()
    gw = Recording(gated=True, replays=True)
    new = sink(gw, attempt=0)
    new.restore_state(state)
    new.process_batch([4], None)
    assert gw.entries[0] == collect.start(0, 3, True, 3) and not new.kept[0][0] < 3


def test_the_sink_starts_its_attempt_once_initialised_not_at_its_first_barrier() -> None:
    """START goes out when the task has opened and restored its operators: published at the first
    barrier, it was a Redis write inside that checkpoint's synchronous part."""
    gw = Recording(gated=True)
    op = sink(gw, attempt=2)
    op.restore_state({"seq": 7, "kept": []})
    op.initialized()
    assert [(e.kind, e.attempt, e.seq) for e in gw.entries] == [(collect.START, 2, 7)]
    op.prepare_snapshot_pre_barrier(1)
    op.process_batch([7], None)
    assert [e.kind for e in gw.entries] == [collect.START, collect.RECORDS]


def test_a_task_initialises_its_collect_sink_before_any_record_or_barrier(tmp_path) -> None:
    from millstream.engine.datastream.stream_execution_environment import StreamExecutionEnvironment
    from tests.engine.progress import until
    from tests.engine.runtime.task_harness import TaskHarness, collect_sink
    from tests.engine.runtime.test_operator_state_tasks import N, Numbers

    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(60_000)
    env.set_parallelism(1)
    numbers = Numbers()
    numbers.next = N  # emits nothing, idles until cancelled
    collect_sink(env.add_source(numbers, "numbers").set_parallelism(1))
    h = TaskHarness(env, str(tmp_path / "chk")).start()
    try:
        until(lambda: h.collect_kinds == [collect.START], what="the sink's START without a record or barrier")
    finally:
        h.cancel()


def test_a_replaying_sink_reads_acknowledgements_after_a_checkpoint_not_inside_its_barrier() -> None:
    """Reading what the client holds is a Redis round trip: not in the checkpoint's synchronous part
    (it was the slowest pause at 3 M keys), but once the checkpoint completed, where it frees the
    records the client holds."""
    gw = Recording(gated=True, replays=True)
    op = sink(gw)
    op.process_batch(["a"], None)
    op.process_batch(["b"], None)
    gw.acks[0] = 1  # the client holds "a"
    op.prepare_snapshot_pre_barrier(1)
    state = op.snapshot_state()
    assert gw.looked == 0
    assert [(p, n) for p, n, _ in state["kept"]] == [(0, 1), (1, 1)]  # "a" too: a restore writes it again
    op.notify_checkpoint_complete(1)
    assert gw.looked == 1 and [(p, n) for p, n, _ in op.kept] == [(1, 1)]
    client = CollectResultBuffer()
    again = Recording(gated=True, replays=True)
    restored = sink(again, attempt=1)
    restored.restore_state(state)
    restored.end_input()
    assert list(client.add(gw.entries[:2] + again.entries)) == ["a", "b"]  # "a" once
