"""JobMaster and checkpoint failures without processes (issue 13, item 5): one failed checkpoint fails
the attempt it belongs to, never the attempts after it; failures count since the last completed
checkpoint and restart from zero on a restore, as in Flink's CheckpointFailureManager."""
from __future__ import annotations

from pathlib import Path

from millstream.engine.executiongraph.states import JobStatus
from tests.engine.jobmanager.test_job_master_savepoints import Harness, graph

CHECKPOINTING = {"interval_ms": 100, "timeout_ms": 500, "tolerable_failures": 0}
RESTART = {"type": "fixed-delay", "attempts": 1000, "delay_ms": 50}


def _harness(tmp_path: Path, **checkpointing) -> Harness:
    config = {"execution.checkpointing": {**CHECKPOINTING, **checkpointing}, "restart-strategy": RESTART}
    return Harness(tmp_path, graph(config=config)).run()


def _triggered(h: Harness) -> list[int]:
    return sorted({m["barrier"][0] for _, _, m in h.gw.of("trigger") if m["attempt"] == h.jm.eg.attempt})


def _next_checkpoint(h: Harness) -> int:
    """The checkpoint in flight, after ticking until the periodic trigger sent one."""
    pending = h.jm.checkpointing.coordinator.pending
    for _ in range(10):
        if pending:
            cid = max(pending)
            assert cid in _triggered(h)
            return cid
        h.tick(50)
    raise AssertionError("no checkpoint was triggered")


def _restart(h: Harness) -> None:
    """The failed attempt's tasks confirm cancellation, the backoff passes, the new attempt runs."""
    assert h.jm.status is JobStatus.RESTARTING
    h.report_all("CANCELED")
    h.tick(60)
    h.tick(0)
    for state in ("INITIALIZING", "RUNNING"):
        h.report_all(state)
    assert h.jm.status is JobStatus.RUNNING


def test_a_checkpoint_that_expires_once_restarts_the_job_once(tmp_path: Path) -> None:
    h = _harness(tmp_path)
    _next_checkpoint(h)  # the first checkpoint is triggered ...
    h.tick(600)  # ... and expires: with 0 tolerable failures the attempt fails
    assert h.jm.status is JobStatus.RESTARTING
    _restart(h)
    assert h.jm.eg.attempt == 1
    h.tick(0)  # before the fix: the old verdict failed every new attempt at its first tick
    assert h.jm.status is JobStatus.RUNNING
    cid = _next_checkpoint(h)
    h.ack_all(cid)
    assert h.jm.checkpointing.coordinator.latest_completed().checkpoint_id == cid
    h.report_all("FINISHED")
    assert h.jm.status is JobStatus.FINISHED
    assert h.jm.eg.attempt == 1
    exceptions = h.store.list_exceptions(h.jm.job_id)
    assert sum(e.exception_name == "CheckpointException" for e in exceptions) == 1


def test_failures_count_since_the_last_completed_checkpoint_and_a_restore_resets_them(tmp_path: Path) -> None:
    h = _harness(tmp_path, tolerable_failures=1)
    _next_checkpoint(h)
    h.tick(600)  # first failure: tolerated
    assert h.jm.status is JobStatus.RUNNING
    h.ack_all(_next_checkpoint(h))  # a completed checkpoint: the count restarts
    _next_checkpoint(h)
    h.tick(600)  # one failure again: tolerated
    assert h.jm.status is JobStatus.RUNNING
    _next_checkpoint(h)
    h.tick(600)  # two in a row: the attempt fails
    assert h.jm.status is JobStatus.RESTARTING
    _restart(h)
    _next_checkpoint(h)
    h.tick(600)  # the new attempt's first failure is its first, not its second
    assert h.jm.status is JobStatus.RUNNING


def test_a_declined_not_ready_checkpoint_fails_fast_and_does_not_count(tmp_path: Path) -> None:
    """A finishing source declines the trigger it can no longer take; the checkpoint fails at once and
    the job, with 0 tolerable failures, is not failed for it."""
    h = _harness(tmp_path)
    cid = _next_checkpoint(h)
    h.jm.on_checkpoint_message(
        {"type": "checkpoint_decline", "attempt": 0, "vertex": "v-src", "subtask": 0, "checkpoint_id": cid,
         "reason": "the source subtask reached the end of its input", "not_ready": True}
    )
    assert cid not in h.jm.checkpointing.coordinator.pending
    assert {m["checkpoint_id"] for _, _, m in h.gw.of("aborted")} == {cid}
    h.tick(0)
    assert h.jm.status is JobStatus.RUNNING
    h.report_all("FINISHED")
    assert h.jm.status is JobStatus.FINISHED
