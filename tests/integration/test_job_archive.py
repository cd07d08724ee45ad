"""Finished jobs leave JobManager memory for the SQL archive (issue 13, item 9), on a real cluster whose
JobManager archives an ended job at once (MILLSTREAM_JOB_ARCHIVE_AFTER_MS=0): every job REST route and
dashboard page still answers for it, and answers the same after a JobManager restart."""
from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

from millstream.backend.ui.job_view import TAB_IDS
from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
# Fields that legitimately move between two reads of an ended job (the time of the read).
_VOLATILE = {"now", "timestamp", "duration"}


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _job_routes(c: Cluster, jid: str, batch: bool = False) -> dict[str, Any]:
    """Every GET route of the REST API that takes a job id, filled in for this job: path -> JSON.
    A BATCH job's checkpoint routes answer 404 (it has none); that answer must last too."""
    job = c.job(jid)
    vid = job["vertices"][0]["id"]
    history = c.http.get(f"/jobs/{jid}/checkpoints").json().get("history") or []
    cid = history[0]["id"] if history else 1
    fill = {"jid": jid, "vertexid": vid, "vertex_id": vid, "vid": vid, "checkpointid": cid, "cid": cid,
            "subtaskindex": 0, "subtask": 0, "attempt": 0}
    out: dict[str, Any] = {}
    for path, ops in c.http.get("/openapi.json").json()["paths"].items():
        if "get" not in ops or "{jid}" not in path or path.startswith("/v1/") or path.endswith("/results"):
            continue  # (results are consumed by the job's client: what was read is gone, as it should be)
        names = re.findall(r"{(\w+)}", path)
        if any(n not in fill for n in names):
            continue  # a trigger id: no request of that kind was made
        url = path.format(**{n: fill[n] for n in names})
        r = c.http.get(url)
        assert r.status_code == 200 or (batch and r.status_code == 404 and "checkpoint" in path), (url, r.status_code, r.text[:300])
        out[path] = _strip(r.json()) if "json" in r.headers.get("content-type", "") else r.text
    return out


def _pages(c: Cluster, jid: str) -> dict[str, int]:
    pages = {f"/ui/jobs/{jid}/{tab}": 0 for tab in TAB_IDS}
    pages["/ui/jobs"] = 0
    for url in pages:
        r = c.http.get(url)
        assert r.status_code == 200, (url, r.status_code, r.text[:300])
        assert jid in r.text or url == "/ui/jobs" or "graph" not in url
        pages[url] = r.status_code
    return pages


def test_a_finished_job_is_served_from_the_archive_also_after_a_jobmanager_restart(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    c.env["MILLSTREAM_JOB_ARCHIVE_AFTER_MS"] = "0"
    try:
        c.start(taskmanagers=1, slots=2)
        res = c.run(PROGRAMS / "checkpointed_count.py", "6000", "4000", options=("-p", "2"), timeout=180)
        assert res.returncode == 0, res.stderr[-3000:]
        jid = re.findall(r"^Job ([0-9a-f]{32}) ", res.stdout, re.M)[0]
        log = (tmp_path / "jobmanager.log")
        c.wait_for(lambda: f"job {jid} (FINISHED) left memory" in log.read_text(), 30, "the job to leave memory")
        job = c.job(jid)
        assert job["state"] == "FINISHED" and job["vertices"]
        assert c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 1
        assert jid in {j["jid"] for j in c.http.get("/jobs/overview").json()["jobs"]}
        assert c.overview()["jobs-finished"] == 1
        archived = _job_routes(c, jid)
        assert len(archived) >= 8, sorted(archived)
        _pages(c, jid)

        # A BATCH job on Spark keeps Spark's application id and stages once it has left memory.
        res = c.run(PROGRAMS / "batch_reduce.py", options=("-p", "2"), timeout=240)
        assert res.returncode == 0, res.stderr[-3000:]
        spark_jid = re.findall(r"^Job ([0-9a-f]{32}) ", res.stdout, re.M)[0]
        c.wait_for(lambda: f"job {spark_jid} (FINISHED) left memory" in log.read_text(), 30, "the Spark job to leave memory")
        spark = c.job(spark_jid)["spark"]
        assert spark["applicationId"] and spark["stages"], spark
        assert all(s["numCompletedTasks"] == s["numTasks"] for s in spark["stages"]), spark
        archived_spark = _job_routes(c, spark_jid, batch=True)
        assert "Stage" in c.http.get(f"/ui/jobs/{spark_jid}/spark").text

        assert c.jobmanager is not None
        c.jobmanager.send_signal(signal.SIGKILL)
        c.jobmanager.wait()
        c.start_jobmanager()
        assert _job_routes(c, jid) == archived  # the same answers from SQL alone
        assert _job_routes(c, spark_jid, batch=True) == archived_spark
        _pages(c, jid)
    finally:
        c.stop()
