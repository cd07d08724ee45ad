"""The collect sink on its own: positions, commits on checkpoint completion, restore, end of input."""
from __future__ import annotations

from typing import Any

from engine.client.collect_result_buffer import CollectResultBuffer
from engine.runtime import collect
from engine.runtime.operators.base import OperatorContext
from engine.runtime.operators.sinks import CollectSinkOperator
from engine.runtime.task_metrics import TaskIOMetrics


class Recording:
    def __init__(self, gated: bool) -> None:
        self.gated = gated
        self.entries: list[collect.CollectEntry] = []

    def publish(self, entries: list[collect.CollectEntry]) -> None:
        self.entries.extend(entries)


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
