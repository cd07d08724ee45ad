"""The pure parts of what an attached ``millstream run`` shows: the slot request timeout's decision and
the Spark progress line."""
from __future__ import annotations

import io

import httpx

from millstream.engine.client.job_progress import JobWatcher, SlotWait, render_spark_progress


def test_the_slot_timeout_counts_only_an_unbroken_wait() -> None:
    wait = SlotWait(timeout_s=10)
    waiting = "waiting for resources: 8 slots needed, 4 available"
    assert not wait.observe("CREATED", waiting, now=100)
    assert not wait.observe("CREATED", waiting, now=109.9)
    assert not wait.observe("RUNNING", None, now=110)  # it got its slots: the clock stops
    assert not wait.observe("CREATED", waiting, now=200)  # waits again (after a restart): a new clock
    assert not wait.observe("CREATED", waiting, now=209)
    assert wait.observe("CREATED", waiting, now=210)


def test_a_created_job_without_a_message_is_not_waiting_for_slots() -> None:
    wait = SlotWait(timeout_s=1)
    assert not wait.observe("CREATED", None, now=0)
    assert not wait.observe("CREATED", None, now=50)


def test_a_job_that_got_its_slots_is_said_to_run_only_once_it_left_created() -> None:
    """Between its slots arriving and its tasks being deployed a job is still CREATED, with no status
    message: the client says nothing until it runs (it once said "got its slots and is CREATED")."""
    err = io.StringIO()
    watcher = JobWatcher(httpx.Client(base_url="http://127.0.0.1:9"), "j1", slot_timeout_s=60, err=err, tty=False)
    waiting = "waiting for resources: 5 slots needed, 4 available"
    for job in (
        {"state": "CREATED", "status-message": waiting},
        {"state": "CREATED", "status-message": waiting},
        {"state": "CREATED"},
        {"state": "RUNNING"},
        {"state": "RUNNING"},
    ):
        assert not watcher._look(job)
    assert err.getvalue().splitlines() == [
        "Job j1 is waiting for slots: 5 slots needed, 4 available",
        "Job j1 got its slots and is RUNNING",
    ]
    watcher.http.close()


def stage(stage_id: int, done: int, active: int, total: int) -> dict:
    return {"stageId": stage_id, "numCompletedTasks": done, "numActiveTasks": active, "numTasks": total}


def test_spark_progress_shows_each_unfinished_stage() -> None:
    assert render_spark_progress([]) == ""
    line = render_spark_progress([stage(0, 8, 0, 8), stage(1, 2, 1, 8)], width=8)
    assert line == "[Stage 1:==>      2+1/8]"
    assert render_spark_progress([stage(0, 8, 0, 8), stage(1, 4, 0, 4)]) == "Spark: 2 stages done"
    many = render_spark_progress([stage(i, 0, 1, 2) for i in range(5)], width=4)
    assert many.count("[Stage") == 3 and many.endswith("(+2 more)")
    assert render_spark_progress([stage(3, 0, 0, 0)]) == "Spark: 1 stage done"
