"""The Spark tab's view model and template: stages from the driver's progress, the
honest state when there is none, and which jobs offer the tab."""
from __future__ import annotations

from millstream.backend.ui import spark_view
from millstream.backend.ui.job_view import JobHeader, tabs_for
from millstream.backend.ui.templating import templates


def _stage(sid: int, job: int, tasks: int, done: int, active: int = 0, failed: int = 0) -> dict:
    return {"stageId": sid, "jobId": job, "name": f"stage {sid}", "numTasks": tasks, "numActiveTasks": active,
            "numCompletedTasks": done, "numFailedTasks": failed}


def _progress(*stages: dict, jobs: list[dict] | None = None, url: str = "http://driver:4040") -> dict:
    return {"applicationId": "local-17", "uiWebUrl": url, "master": "local[*]", "updated": 1_700_000_000_000,
            "jobs": jobs if jobs is not None else [{"jobId": 0, "status": "RUNNING", "stageIds": [s["stageId"] for s in stages]}],
            "stages": list(stages)}


def _render(progress: spark_view.SparkProgress, alive: bool = True) -> str:
    header = JobHeader("a" * 32, "j", "RUNNING" if alive else "FINISHED", "BATCH", 0, 0, {}, None, alive)
    return templates.env.get_template("job/spark.html").render(spark=progress, header=header)


def test_stages_are_sorted_and_their_bar_segments_are_shares_of_the_tasks() -> None:
    p = spark_view.spark_progress(_progress(_stage(3, 0, 8, 2, 2), _stage(1, 0, 4, 4)), "spark", alive=True)
    assert [s.id for s in p.stages] == [1, 3] and p.state is None
    s1, s3 = p.stages
    assert (s1.status, s3.status) == ("complete", "active")
    assert (s3.pct(s3.completed), s3.pct(s3.active), s3.pct(s3.failed)) == (25.0, 25.0, 0.0)
    assert (p.tasks_completed, p.tasks_total) == (6, 12)
    html = _render(p)
    assert html.count('class="spark-stage') == 2 and 'style="width: 25.0%"' in html
    assert 'href="http://driver:4040"' in html and "6 / 12 completed" in html


def test_retried_failures_never_push_the_bar_past_full() -> None:
    (s,) = spark_view.spark_progress(_progress(_stage(0, 0, 2, 2, failed=2)), "spark", True).stages
    assert s.pct(s.completed) + s.pct(s.active) + s.pct(s.failed) == 100.0


def test_a_stage_of_a_succeeded_job_that_ran_no_task_is_skipped_not_pending() -> None:
    jobs = [{"jobId": 0, "status": "SUCCEEDED", "stageIds": [0, 1]}, {"jobId": 1, "status": "RUNNING", "stageIds": [2]}]
    p = spark_view.spark_progress(_progress(_stage(0, 0, 1, 0), _stage(1, 0, 1, 1), _stage(2, 1, 1, 0), jobs=jobs), "spark", True)
    assert [s.status for s in p.stages] == ["skipped", "complete", "pending"]
    assert (p.tasks_completed, p.tasks_total) == (1, 2)  # a skipped stage's tasks never run


def test_the_spark_ui_link_is_offered_only_while_the_job_runs_and_only_for_http() -> None:
    ended = _render(spark_view.spark_progress(_progress(_stage(0, 0, 1, 1)), "spark", alive=False), alive=False)
    assert "href=" not in ended and "closed when the job ended" in ended
    hostile = spark_view.spark_progress(_progress(_stage(0, 0, 1, 1), url="javascript:alert(1)"), "spark", True)
    assert hostile.ui_url is None and "javascript:" not in _render(hostile)


def test_without_stages_the_tab_says_why() -> None:
    not_started = _progress(jobs=[]) | {"applicationId": None}
    cases = [
        (None, "native", True, "This job does not run on Spark"),
        (None, "spark", False, "No Spark progress is known"),
        (not_started, "spark", True, "Waiting for Spark"),
        (not_started, "spark", False, "Spark never reported progress"),
        (_progress(jobs=[]), "spark", True, "Spark has not submitted a stage yet"),
    ]
    for progress, engine, alive, text in cases:
        assert text in _render(spark_view.spark_progress(progress, engine, alive), alive), text


def test_only_batch_jobs_have_a_spark_tab() -> None:
    assert "spark" in dict(tabs_for("BATCH", on_spark=True)) and "spark" not in dict(tabs_for("STREAMING"))
