"""JobMaster savepoints without processes: a recording gateway, an in-memory store and a fake clock.

What goes to the tasks (barrier tuples, notifications, aborts, cancels), what is
written (``_metadata``, savepoint and checkpoint records) and the job's states.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from millstream.engine.checkpoint.messages import TaskAck
from millstream.engine.checkpoint.rescale import NonRestoredStateError, TaskRestore
from millstream.engine.checkpoint.stats_tracker import CheckpointStatsTracker
from millstream.engine.checkpoint.storage import InvalidSavepoint
from millstream.engine.executiongraph.states import JobStatus
from millstream.engine.graph.job_graph import JobEdge, JobGraph, JobVertex, OperatorDescriptor
from millstream.engine.jobmanager.checkpointing import JobCheckpointing
from millstream.engine.jobmanager.job_master import JobMaster, JobNotRunning
from millstream.engine.jobmanager.job_store import InMemoryJobStore
from millstream.engine.resourcemanager.slot_pool import SlotPool, TaskManagerInfo

JOB = "ab" * 16


class RecordingGateway:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def _rec(self, kind: str, *args: Any) -> None:
        self.calls.append((kind, args))

    def of(self, kind: str) -> list[Any]:
        return [a for k, a in self.calls if k == kind]

    def upload_user_code(self, job_id: str, code: bytes) -> None:
        self._rec("upload", job_id)

    def submit_task(self, tm_id: str, slot: int, tdd: Any) -> None:
        self._rec("submit", tm_id, slot, tdd)

    def cancel_job(self, tm_id: str, slot: int, job_id: str, attempt: int) -> None:
        self._rec("cancel", tm_id, slot)

    def release_job(self, job_id: str) -> None:
        self._rec("release", job_id)

    def release_attempt(self, job_id: str, attempt: int) -> None:
        self._rec("release_attempt", attempt)

    def trigger_checkpoint(self, tm_id: str, slot: int, msg: dict) -> None:
        self._rec("trigger", tm_id, slot, msg)

    def notify_checkpoint_complete(self, tm_id: str, slot: int, msg: dict) -> None:
        self._rec("complete", tm_id, slot, msg)

    def notify_checkpoint_aborted(self, tm_id: str, slot: int, msg: dict) -> None:
        self._rec("aborted", tm_id, slot, msg)


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t

    def advance(self, ms: int) -> None:
        self.t += ms / 1000


def graph(parallelism: int = 2, config: dict | None = None, count_uid: str = "counts", job_id: str = JOB) -> JobGraph:
    src = JobVertex("v-src", "Source", parallelism, 128, (OperatorDescriptor(1, "op-src", "Source", "source", "src"),), (), True, False)
    agg = JobVertex("v-agg", "Counts", parallelism, 128, (OperatorDescriptor(2, f"op-{count_uid}", "Counts", "reduce", count_uid),), (), False, False)
    return JobGraph(job_id, "counts", (src, agg), (JobEdge(0, "v-src", "v-agg", 1, 2, "HASH"),), config=config or {})


class Harness:
    def __init__(self, tmp: Path, job_graph: JobGraph | None = None, store: InMemoryJobStore | None = None) -> None:
        self.gw = RecordingGateway()
        self.store = store or InMemoryJobStore()
        self.clock = Clock()
        self.pool = SlotPool()
        self.pool.register(TaskManagerInfo("tm-1", 4))
        self.jm = JobMaster(
            job_graph or graph(), b"code", self.gw, self.store, self.clock, None,
            str(tmp / "checkpoints"), str(tmp / "savepoints"),
        )
        self.jm.persist()

    def run(self) -> "Harness":
        assert self.jm.try_schedule(self.pool)
        for state in ("INITIALIZING", "RUNNING"):
            self.report_all(state)
        assert self.jm.status is JobStatus.RUNNING
        return self

    def report_all(self, state: str) -> None:
        for ejv, ev in self.jm.eg.all_executions():
            self.jm.on_task_state(
                {"attempt": self.jm.eg.attempt, "vertex": ejv.job_vertex.id, "subtask": ev.subtask, "state": state,
                 "ts": int(self.clock() * 1000), "tm": "tm-1"},
                self.pool,
            )

    def tasks(self) -> list[tuple[str, int]]:
        return [(ejv.job_vertex.id, ev.subtask) for ejv, ev in self.jm.eg.all_executions()]

    def ack_all(self, checkpoint_id: int, handles: bool = True) -> None:
        for vertex, sub in self.tasks():
            op = "op-src" if vertex == "v-src" else self.jm.job_graph.vertex(vertex).operators[0].operator_id
            ack = TaskAck({op: {"inline": [vertex, sub]}} if handles else {}, 10, source_offsets={"op-src": sub * 100} if vertex == "v-src" else {})
            self.jm.on_checkpoint_message(
                {"type": "checkpoint_ack", "attempt": self.jm.eg.attempt, "vertex": vertex, "subtask": sub,
                 "checkpoint_id": checkpoint_id, "ack": ack.to_dict()}
            )

    def tick(self, ms: int = 0) -> None:
        self.clock.advance(ms)
        self.jm.tick(self.pool)


def test_a_savepoint_works_with_checkpointing_off_and_is_recorded(tmp_path: Path) -> None:
    h = Harness(tmp_path).run()
    assert not h.jm.checkpointing.enabled
    rec = h.jm.trigger_savepoint("req-1", None)
    triggers = h.gw.of("trigger")
    assert [(m["vertex"], m["subtask"]) for _, _, m in triggers] == [("v-src", 0), ("v-src", 1)]
    cid, _, location, kind, drain = triggers[0][2]["barrier"]
    assert (kind, drain) == ("SAVEPOINT", False)
    assert location.startswith(str(tmp_path / "savepoints" / "savepoint-abab"))
    assert h.store.get_savepoint(JOB, "req-1").status == "IN_PROGRESS"

    h.ack_all(cid)
    done = h.store.get_savepoint(JOB, "req-1")
    assert (done.status, done.path, done.checkpoint_id) == ("COMPLETED", location, rec.checkpoint_id)
    meta = json.loads((Path(location) / "_metadata").read_text())
    assert meta["is_savepoint"] and meta["checkpoint_id"] == cid
    assert sorted(slot for _, slot, _ in h.gw.of("complete")) == [0, 1]  # once per slot, not per task
    assert h.jm.status is JobStatus.RUNNING
    history = h.store.list_checkpoints(JOB)
    assert [(r["id"], r["status"], r["is_savepoint"], r["external_path"]) for r in history] == [(cid, "COMPLETED", True, location)]


def test_the_jobs_state_savepoints_dir_is_the_default_target(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config={"state.savepoints.dir": f"file://{tmp_path / 'configured'}"})).run()
    rec = h.jm.trigger_savepoint("cfg", None)
    assert Path(rec.target_directory) == tmp_path / "configured"
    rec = h.jm.trigger_savepoint("given", str(tmp_path / "given"))
    assert Path(rec.target_directory) == tmp_path / "given"


def test_the_same_request_id_takes_one_savepoint(tmp_path: Path) -> None:
    h = Harness(tmp_path).run()
    first = h.jm.trigger_savepoint("again", str(tmp_path / "sp"))
    second = h.jm.trigger_savepoint("again", str(tmp_path / "sp"))
    assert second.checkpoint_id == first.checkpoint_id
    assert len(h.gw.of("trigger")) == 2  # the two source subtasks, once


def test_stop_with_savepoint_sends_a_draining_sync_barrier_holds_back_checkpoints_and_finishes(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config={"execution.checkpointing": {"interval_ms": 100}})).run()
    h.jm.trigger_savepoint("stop-1", str(tmp_path / "sp"), stop=True, drain=True)
    cid, _, _, kind, drain = h.gw.of("trigger")[0][2]["barrier"]
    assert (kind, drain) == ("SYNC_SAVEPOINT", True)
    h.tick(1000)
    h.tick(1000)
    assert len(h.gw.of("trigger")) == 2  # no periodic checkpoint while stopping
    with pytest.raises(JobNotRunning, match="already stopping"):
        h.jm.trigger_savepoint("stop-2", str(tmp_path / "sp"), stop=True)
    h.ack_all(cid)
    assert h.store.get_savepoint(JOB, "stop-1").status == "COMPLETED"
    assert [m["checkpoint_id"] for _, _, m in h.gw.of("complete")] == [cid, cid]  # both slots
    h.report_all("FINISHED")  # the sources end after the notification, and everything drains
    assert h.jm.status is JobStatus.FINISHED
    assert (tmp_path / "sp").exists() and any((tmp_path / "sp").glob("savepoint-*/_metadata"))


def test_a_failed_stop_with_savepoint_aborts_on_every_task_and_the_job_keeps_running(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config={"execution.checkpointing": {"interval_ms": 100}})).run()
    h.jm.trigger_savepoint("stop-1", str(tmp_path / "sp"), stop=True)
    cid = h.gw.of("trigger")[0][2]["barrier"][0]
    h.jm.on_checkpoint_message(
        {"type": "checkpoint_decline", "attempt": 0, "vertex": "v-agg", "subtask": 1, "checkpoint_id": cid,
         "reason": "disk full"}
    )
    failed = h.store.get_savepoint(JOB, "stop-1")
    assert failed.status == "FAILED" and "disk full" in failed.failure_cause
    assert [m["checkpoint_id"] for _, _, m in h.gw.of("aborted")] == [cid, cid]  # both slots
    assert h.jm.status is JobStatus.RUNNING
    h.tick(1000)
    h.tick(1000)
    assert len(h.gw.of("trigger")) > 2  # periodic checkpoints resume


def test_cancel_job_cancels_after_the_savepoint_completes(tmp_path: Path) -> None:
    h = Harness(tmp_path).run()
    rec = h.jm.trigger_savepoint("sp-cancel", str(tmp_path / "sp"), cancel_job=True)
    h.tick()
    assert h.jm.status is JobStatus.RUNNING and not h.gw.of("cancel")
    h.ack_all(rec.checkpoint_id)
    h.tick()
    assert h.jm.status is JobStatus.CANCELLING and h.gw.of("cancel")


def test_finished_subtasks_are_acknowledged_for_and_a_finished_source_keeps_no_splits(tmp_path: Path) -> None:
    import pickle

    h = Harness(tmp_path).run()
    for vertex in ("v-src", "v-agg"):  # e.g. a source subtask a rescale left without a split, and its reader
        h.jm.on_task_state(
            {"attempt": 0, "vertex": vertex, "subtask": 1, "state": "FINISHED", "ts": 1, "tm": "tm-1"}, h.pool
        )
    rec = h.jm.trigger_savepoint("with-finished", str(tmp_path / "sp"))
    assert [(m["vertex"], m["subtask"]) for _, _, m in h.gw.of("trigger")] == [("v-src", 0)]
    for vertex in ("v-src", "v-agg"):
        ack = TaskAck({}, 1, source_offsets={"op-src": [[5, 9]]} if vertex == "v-src" else {})
        h.jm.on_checkpoint_message(
            {"type": "checkpoint_ack", "attempt": 0, "vertex": vertex, "subtask": 0,
             "checkpoint_id": rec.checkpoint_id, "ack": ack.to_dict()}
        )
    done = h.store.get_savepoint(JOB, "with-finished")
    assert done.status == "COMPLETED"
    meta = json.loads((Path(done.path) / "_metadata").read_text())
    src = next(o for o in meta["operators"] if o["operator_id"] == "op-src")
    assert [s.get("source_offset") for s in src["subtasks"]] == [[[5, 9]], []]
    assert pickle.loads((Path(done.path) / src["subtasks"][1]["handle"]).read_bytes())["splits"] == []  # handles are relative
    h.report_all("FINISHED")
    with pytest.raises(JobNotRunning):
        h.jm.trigger_savepoint("late", str(tmp_path / "sp"))


def test_periodic_checkpoints_go_on_after_a_source_subtask_finished(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config={"execution.checkpointing": {"interval_ms": 100}})).run()
    h.jm.on_task_state({"attempt": 0, "vertex": "v-src", "subtask": 1, "state": "FINISHED", "ts": 1, "tm": "tm-1"}, h.pool)
    h.tick()
    h.tick(150)
    (trigger,) = h.gw.of("trigger")
    assert (trigger[2]["vertex"], trigger[2]["subtask"]) == ("v-src", 0)
    cid = trigger[2]["barrier"][0]
    for vertex, sub in (("v-src", 0), ("v-agg", 0), ("v-agg", 1)):
        h.jm.on_checkpoint_message(
            {"type": "checkpoint_ack", "attempt": 0, "vertex": vertex, "subtask": sub, "checkpoint_id": cid,
             "ack": TaskAck({}, 1).to_dict()}
        )
    assert h.jm.checkpointing.overview()["counts"]["completed"] == 1
    h.jm.on_task_state({"attempt": 0, "vertex": "v-src", "subtask": 0, "state": "FINISHED", "ts": 2, "tm": "tm-1"}, h.pool)
    h.tick(150)
    h.tick(150)
    assert len(h.gw.of("trigger")) == 1  # every source finished: nothing could take a barrier


def test_a_savepoint_of_a_job_that_does_not_run_is_refused(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    with pytest.raises(JobNotRunning, match="it is CREATED"):
        h.jm.trigger_savepoint("early", str(tmp_path / "sp"))
    assert h.store.list_savepoints(JOB) == []


def _savepoint(tmp_path: Path) -> str:
    h = Harness(tmp_path).run()
    rec = h.jm.trigger_savepoint("sp", str(tmp_path / "sp"), stop=True)
    h.ack_all(rec.checkpoint_id)
    path = h.store.get_savepoint(JOB, "sp").path
    assert path
    return path


def test_restoring_at_a_new_parallelism_plans_every_new_subtask_and_counts_a_restore(tmp_path: Path) -> None:
    path = _savepoint(tmp_path)
    other = "cd" * 16
    h = Harness(tmp_path / "b", graph(3, job_id=other))
    restored = h.jm.restore_from_savepoint(path, False)
    h.run()
    plans = {(tdd.vertex_id, tdd.subtask): tdd.restore for _, _, tdd in h.gw.of("submit")}
    assert sorted(plans) == [("v-agg", i) for i in range(3)] + [("v-src", i) for i in range(3)]
    agg = TaskRestore.from_dict(plans[("v-agg", 2)]).operators["op-counts"]
    assert (agg.parallelism, agg.old_parallelism, sorted(agg.handles)) == (3, 2, [0, 1])
    overview = h.jm.checkpointing.overview()
    assert overview["counts"]["restored"] == 1
    assert overview["latest"]["restored"]["external_path"] == path
    rec = h.jm.trigger_savepoint("next", str(tmp_path / "sp2"))
    assert rec.checkpoint_id > restored.checkpoint_id  # ids continue after the savepoint
    assert h.store.list_checkpoint_restores(other)[0]["external_path"] == path


def test_a_missing_or_corrupt_savepoint_is_refused_with_the_reason(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    with pytest.raises(InvalidSavepoint, match="does not exist"):
        h.jm.restore_from_savepoint(str(tmp_path / "nope"), False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidSavepoint, match="no _metadata"):
        h.jm.restore_from_savepoint(str(tmp_path / "empty"), False)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "_metadata").write_text("{not json")
    with pytest.raises(InvalidSavepoint, match="corrupt"):
        h.jm.restore_from_savepoint(str(tmp_path / "bad"), False)
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "_metadata").write_text(json.dumps({"operators": [], "checkpoint_id": 1, "format": "other"}))
    with pytest.raises(InvalidSavepoint, match="corrupt"):
        h.jm.restore_from_savepoint(str(tmp_path / "odd"), False)
    assert h.jm.restore_plan == {}


def test_state_no_operator_takes_is_refused_naming_it_unless_allowed(tmp_path: Path) -> None:
    path = _savepoint(tmp_path)
    renamed = graph(2, count_uid="totals", job_id="cd" * 16)
    h = Harness(tmp_path / "b", renamed)
    with pytest.raises(NonRestoredStateError, match="uid 'counts'"):
        h.jm.restore_from_savepoint(path, False)
    h.jm.restore_from_savepoint(path, True)
    assert set(h.jm.restore_plan) == {("v-src", 0), ("v-src", 1)}  # the source still takes its offsets
    assert h.jm.allow_non_restored_state  # a later failover restores with the same permission


def test_history_written_to_the_store_rebuilds_the_same_overview(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config={"execution.checkpointing": {"interval_ms": 100}})).run()
    h.tick()  # the first checkpoint is due one interval after the job runs
    for _ in range(3):
        h.tick(150)
        cid = h.gw.of("trigger")[-1][2]["barrier"][0]
        h.ack_all(cid)
    h.tick(150)  # one more in flight
    live = h.jm.checkpointing.overview()
    back = JobCheckpointing.archived(
        h.jm.job_graph, CheckpointStatsTracker.from_records(h.store.list_checkpoints(JOB)), str(tmp_path)
    ).overview()
    assert back["counts"] == live["counts"]
    assert [e["id"] for e in back["history"]] == [e["id"] for e in live["history"]]
    assert back["latest"]["completed"]["external_path"] == live["latest"]["completed"]["external_path"]

