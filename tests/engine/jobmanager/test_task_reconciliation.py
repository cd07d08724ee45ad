"""Task reconciliation after a JobManager takeover (issue 18), without processes: which jobs a new
JobManager adopts from the slots' task offers, and what adopting does: no deploy, the same attempt
and slots, checkpoint ids after every id the tasks saw, the old leader's in-flight checkpoints
aborted, and the latest completed checkpoint announced again (the two-phase-commit point)."""
from __future__ import annotations

from pathlib import Path

from millstream.engine.checkpoint.stats_tracker import CheckpointStatsTracker
from millstream.engine.executiongraph.states import ExecutionState, JobStatus
from millstream.engine.jobmanager.job_master import JobMaster
from millstream.engine.jobmanager.task_reconciliation import Adoption, TaskOffers, reconcile
from millstream.engine.resourcemanager.slot_pool import SlotPool, TaskManagerInfo
from tests.engine.jobmanager.test_job_master_savepoints import Harness, RecordingGateway, graph

CHECKPOINTING = {"execution.checkpointing": {"interval_ms": 100, "timeout_ms": 60_000, "max_concurrent": 3}}


def _offers(placement: dict[tuple[str, int], tuple[str, int]], attempt: int, state: str = "RUNNING", seen: int = 0,
            job: str = "ab" * 16) -> TaskOffers:
    answers: dict[tuple[str, int], dict] = {}
    for (vertex, subtask), (tm, slot) in placement.items():
        offer = answers.setdefault((tm, slot), {"tm": tm, "slot": slot, "tasks": [], "checkpoints": [[job, attempt, seen]]})
        offer["tasks"].append({"job": job, "vertex": vertex, "subtask": subtask, "attempt": attempt, "state": state})
    return TaskOffers.parse(answers)


PLACEMENT = {("v-src", 0): ("tm-1", 0), ("v-agg", 0): ("tm-1", 0), ("v-src", 1): ("tm-2", 0), ("v-agg", 1): ("tm-2", 0)}


def test_every_subtask_of_the_attempt_running_is_adopted_with_its_placement() -> None:
    decision = reconcile(graph(), 3, _offers(PLACEMENT, 3, seen=7), ["tm-1", "tm-2"])
    assert isinstance(decision, Adoption)
    assert decision.attempt == 3 and dict(decision.placement) == PLACEMENT and decision.max_checkpoint_seen == 7
    assert decision.slots == [("tm-1", 0), ("tm-2", 0)]


def test_anything_less_is_restarted_and_says_why() -> None:
    missing = {k: v for k, v in PLACEMENT.items() if k != ("v-agg", 1)}
    assert "Counts (2/2) of attempt 3 is not running" in reconcile(graph(), 3, _offers(missing, 3), ["tm-1", "tm-2"])
    assert "is INITIALIZING" in reconcile(graph(), 3, _offers(PLACEMENT, 3, "INITIALIZING"), ["tm-1", "tm-2"])
    assert "tm-2" in reconcile(graph(), 3, _offers(PLACEMENT, 3), ["tm-1"])  # its TaskManager is gone
    assert "not running" in reconcile(graph(), 4, _offers(PLACEMENT, 3), ["tm-1", "tm-2"])  # an older attempt
    assert "newer" in reconcile(graph(), 2, _offers(PLACEMENT, 3), ["tm-1", "tm-2"])
    assert "not running" in reconcile(graph(), 3, _offers(PLACEMENT, 3, job="cd" * 16), ["tm-1", "tm-2"])


def test_tasks_of_an_older_attempt_are_listed_to_be_cancelled() -> None:
    offers = _offers(PLACEMENT, 3)
    stale = TaskOffers.parse({("tm-3", 1): {"tm": "tm-3", "slot": 1, "tasks": [
        {"job": "ab" * 16, "vertex": "v-src", "subtask": 0, "attempt": 2, "state": "CANCELING"}]}})
    both = TaskOffers(offers.tasks + stale.tasks, offers.checkpoints, offers.answered | stale.answered)
    decision = reconcile(graph(), 3, both, ["tm-1", "tm-2", "tm-3"])
    assert isinstance(decision, Adoption) and decision.stale == (("tm-3", 1, 2),)


def test_a_new_job_master_adopts_without_deploying_and_checkpoints_go_on_after_the_old_ones(tmp_path: Path) -> None:
    # The old leader: the job runs as attempt 0, checkpoint 1 completed (its _metadata written),
    # checkpoints 2 and 3 triggered and in flight when it dies.
    old = Harness(tmp_path, graph(config=CHECKPOINTING)).run()
    coordinator = old.jm.checkpointing.coordinator

    def trigger() -> int:
        for _ in range(5):
            known = set(coordinator.pending)
            old.tick(150)
            if set(coordinator.pending) - known:
                return max(coordinator.pending)
        raise AssertionError("no checkpoint was triggered")

    first = trigger()
    old.ack_all(first)
    trigger()
    trigger()
    in_flight = sorted(coordinator.pending)
    assert in_flight and first not in in_flight
    for cid in in_flight:  # a task wrote part of their state before the leader died
        (tmp_path / "checkpoints" / old.jm.job_id / f"chk-{cid}").mkdir(parents=True, exist_ok=True)
    seen = max(in_flight)
    placement = {(ejv.job_vertex.id, ev.subtask): (ev.current.taskmanager_id, ev.current.slot)
                 for ejv, ev in old.jm.eg.all_executions()}

    # The new leader: the job rebuilt from the store, its checkpoint history from SQL.
    record = old.store.get_job(old.jm.job_id)
    stats = CheckpointStatsTracker.from_records(
        old.store.list_checkpoints(old.jm.job_id), now_ms=int(old.clock() * 1000)
    )
    gw, pool = RecordingGateway(), SlotPool()
    pool.register(TaskManagerInfo("tm-1", 4))
    jm = JobMaster(old.jm.job_graph, b"code", gw, old.store, old.clock, None, str(tmp_path / "checkpoints"),
                   str(tmp_path / "savepoints"), stats)
    decision = reconcile(jm.job_graph, 0, _offers(placement, 0, seen=seen, job=jm.job_id), ["tm-1"])
    assert isinstance(decision, Adoption)
    assert jm.adopt(decision, record, pool) is None

    assert gw.of("submit") == [] and gw.of("upload") == [] and gw.of("cancel") == []
    assert jm.status is JobStatus.RUNNING and jm.eg.attempt == 0
    assert all(ev.current.state is ExecutionState.RUNNING for _, ev in jm.eg.all_executions())
    assert {(ev.current.taskmanager_id, ev.current.slot) for _, ev in jm.eg.all_executions()} == set(placement.values())
    assert set(pool.allocations.values()) == {jm.job_id} and len(pool.allocations) == len(set(placement.values()))
    # Checkpoint `first` is announced again (its staged output commits now if the old leader never
    # said so), the in-flight ones are aborted and their partial directories deleted.
    assert {m["checkpoint_id"] for _, _, m in gw.of("complete")} == {first}
    assert {m["checkpoint_id"] for _, _, m in gw.of("aborted")} == set(range(first + 1, seen + 1))
    assert all(m["attempt"] == 0 for _, _, m in gw.of("complete") + gw.of("aborted"))
    for cid in in_flight:
        assert not (tmp_path / "checkpoints" / jm.job_id / f"chk-{cid}").exists()
    assert (tmp_path / "checkpoints" / jm.job_id / f"chk-{first}" / "_metadata").exists()

    # Periodic checkpoints go on, with ids after every one the old leader handed out.
    for _ in range(5):
        old.clock.advance(150)
        jm.tick(pool)
    triggered = sorted({m["barrier"][0] for _, _, m in gw.of("trigger")})
    assert triggered and triggered[0] == seen + 1
    assert jm.checkpointing.coordinator.latest_completed().checkpoint_id == first  # the fallback of a failover


def test_a_job_whose_slot_another_adopted_job_holds_is_not_adopted(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config=CHECKPOINTING))
    record = h.store.get_job(h.jm.job_id)
    h.pool.assign("cd" * 16, [("tm-1", 0)])
    decision = reconcile(h.jm.job_graph, 0, _offers(PLACEMENT, 0), ["tm-1", "tm-2"])
    assert isinstance(decision, Adoption)
    assert "taken by another job" in (h.jm.adopt(decision, record, h.pool) or "")
    assert h.gw.calls == [] and h.jm.status is JobStatus.CREATED


def _mixed(finished: set[tuple[str, int]], attempt: int = 0, job: str = "ab" * 16) -> TaskOffers:
    """The slots' answers when the subtasks in ``finished`` ended (FINISHED) and the others run."""
    answers: dict[tuple[str, int], dict] = {}
    for (vertex, subtask), (tm, slot) in PLACEMENT.items():
        offer = answers.setdefault((tm, slot), {"tm": tm, "slot": slot, "tasks": [], "checkpoints": []})
        state = "FINISHED" if (vertex, subtask) in finished else "RUNNING"
        offer["tasks"].append({"job": job, "vertex": vertex, "subtask": subtask, "attempt": attempt, "state": state})
    return TaskOffers.parse(answers)


def test_tasks_that_finished_while_no_jobmanager_led_are_adopted_as_finished() -> None:
    sources = {("v-src", 0), ("v-src", 1)}
    decision = reconcile(graph(), 0, _mixed(sources), ["tm-1", "tm-2"])
    assert isinstance(decision, Adoption) and dict(decision.placement) == PLACEMENT
    assert decision.finished == (("v-src", 0), ("v-src", 1))
    # A subtask that failed or was cancelled while no JobManager led: the job restarts, as before.
    failed = _offers({("v-src", 0): ("tm-1", 0)}, 0, "FAILED")
    rest = _mixed(set())
    both = TaskOffers(failed.tasks + tuple(t for t in rest.tasks if (t.vertex, t.subtask) != ("v-src", 0)))
    assert "is FAILED, not RUNNING or FINISHED" in reconcile(graph(), 0, both, ["tm-1", "tm-2"])
    # One attempt's subtask reported both running and finished (two slots): neither is trusted.
    twice = TaskOffers(rest.tasks + _offers({("v-src", 0): ("tm-2", 1)}, 0, "FINISHED").tasks)
    assert "reported twice" in reconcile(graph(), 0, twice, ["tm-1", "tm-2"])


def test_a_job_all_of_whose_tasks_finished_meanwhile_finishes_when_adopted(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config=CHECKPOINTING))
    record = h.store.get_job(h.jm.job_id)
    h.pool.register(TaskManagerInfo("tm-1", 1))
    h.pool.register(TaskManagerInfo("tm-2", 1))
    decision = reconcile(h.jm.job_graph, 0, _mixed(set(PLACEMENT), job=h.jm.job_id), ["tm-1", "tm-2"])
    assert isinstance(decision, Adoption) and len(decision.finished) == 4
    assert h.jm.adopt(decision, record, h.pool) is None
    assert h.jm.status is JobStatus.FINISHED and h.jm.eg.attempt == 0
    assert all(ev.current.state is ExecutionState.FINISHED for _, ev in h.jm.eg.all_executions())
    assert h.gw.of("submit") == [] and not h.pool.allocations  # nothing deployed; the slots are free again
    assert h.store.get_job(h.jm.job_id).state == "FINISHED"


def test_a_job_whose_sources_finished_meanwhile_is_adopted_running_and_finishes_with_the_rest(tmp_path: Path) -> None:
    h = Harness(tmp_path, graph(config=CHECKPOINTING))
    record = h.store.get_job(h.jm.job_id)
    decision = reconcile(h.jm.job_graph, 0, _mixed({("v-src", 0), ("v-src", 1)}, job=h.jm.job_id), ["tm-1", "tm-2"])
    assert isinstance(decision, Adoption)
    assert h.jm.adopt(decision, record, h.pool) is None
    assert h.jm.status is JobStatus.RUNNING
    states = {(ejv.job_vertex.id, ev.subtask): ev.current.state for ejv, ev in h.jm.eg.all_executions()}
    assert states == {("v-src", 0): ExecutionState.FINISHED, ("v-src", 1): ExecutionState.FINISHED,
                      ("v-agg", 0): ExecutionState.RUNNING, ("v-agg", 1): ExecutionState.RUNNING}
    for subtask, (tm, slot) in ((0, ("tm-1", 0)), (1, ("tm-2", 0))):  # the rest report as they end
        h.jm.on_task_state({"attempt": 0, "vertex": "v-agg", "subtask": subtask, "state": "FINISHED", "ts": 1,
                            "tm": tm, "slot": slot}, h.pool)
    assert h.jm.status is JobStatus.FINISHED
