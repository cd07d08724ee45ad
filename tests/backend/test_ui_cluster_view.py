"""Cluster pages' view models: job filtering and sorting, the slot grid, heartbeat lateness."""
from __future__ import annotations

from millstream.backend.ui.cluster_view import filter_jobs, heartbeat_lateness, slots_grid, split_jobs
from millstream.engine.jobmanager.job_store import JobRecord
from millstream.engine.resourcemanager.slot_pool import SlotPool, TaskManagerInfo
from millstream.engine.scheduler.slot_assignment import SlotId


def _job(jid: str, name: str, state: str, start: int, end: int = -1) -> dict:
    return {"jid": jid, "name": name, "state": state, "start-time": start, "duration": (end if end > 0 else 100) - start}


JOBS = [_job("1", "WordCount", "RUNNING", 10), _job("2", "clicks", "FAILED", 20, 50), _job("3", "Word index", "FINISHED", 5, 90)]


def test_filters_by_state_and_name_substring_case_insensitively() -> None:
    assert [j["jid"] for j in filter_jobs(JOBS, name="word")] == ["1", "3"]
    assert [j["jid"] for j in filter_jobs(JOBS, state="FAILED")] == ["2"]
    assert filter_jobs(JOBS, state="RUNNING", name="clicks") == []


def test_sorts_by_column_in_either_direction() -> None:
    assert [j["jid"] for j in filter_jobs(JOBS, sort="start")] == ["2", "1", "3"]
    assert [j["jid"] for j in filter_jobs(JOBS, sort="name", descending=False)] == ["2", "3", "1"]  # ignoring case
    assert [j["jid"] for j in filter_jobs(JOBS, sort="duration")] == ["1", "3", "2"]
    assert [j["jid"] for j in filter_jobs(JOBS, sort="bogus")] == ["2", "1", "3"]  # falls back to start time


def test_split_jobs_separates_running_from_completed() -> None:
    recs = [JobRecord("a" * 32, "r", "RUNNING", "STREAMING", 1), JobRecord("b" * 32, "f", "CANCELED", "STREAMING", 2, 3)]
    running, done = split_jobs(recs, 10)
    assert [j["name"] for j in running] == ["r"] and [j["name"] for j in done] == ["f"]


def test_slot_grid_shows_each_slot_with_its_job_and_subtasks_and_marks_free_ones() -> None:
    pool = SlotPool()
    pool.register(TaskManagerInfo("tm-a", 2, host="h1"))
    pool.register(TaskManagerInfo("tm-b", 1, host="h2"))
    jid = "c" * 32
    pool.allocations[SlotId("tm-a", 1)] = jid
    rec = JobRecord(jid, "job", "RUNNING", "STREAMING", 1, vertices=[
        {"id": "v", "name": "Map", "parallelism": 1, "maxParallelism": 128, "status": "RUNNING", "tasks": {},
         "subtasks": [{"subtask": 0, "status": "RUNNING", "taskmanager_id": "tm-a", "slot": 1, "timestamps": {}}]},
    ])
    rows = slots_grid(pool, {jid: rec})
    assert [r.id for r in rows] == ["tm-a", "tm-b"]
    a = rows[0]
    assert a.free == 1 and a.slots[0].job_id is None
    assert a.slots[1].job_name == "job" and a.slots[1].subtasks == ("Map #0",)
    assert rows[1].free == 1


def test_heartbeat_lateness_thresholds() -> None:
    assert heartbeat_lateness(10_000, 10_500, 1000, 10_000) == "ok"
    assert heartbeat_lateness(10_000, 12_500, 1000, 10_000) == "late"
    assert heartbeat_lateness(10_000, 16_000, 1000, 10_000) == "critical"
    assert heartbeat_lateness(0, 16_000, 1000, 10_000) == "critical"
