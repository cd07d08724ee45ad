"""Issue 14: what a JobManager remembered against replays must hold across its restart.

The attacker has the Redis URL (not the cluster secret). They copy genuine sealed items before the
JobManager restarts, a slot_lost report and a print line, and push them again after it restarted,
when its in-memory replay windows are empty. The slot_lost report was sealed for the earlier
JobManager's epoch and is refused; the print line is known as a copy of one read before. Each test
fails on a JobManager that starts with empty memory and no epoch.
"""
from __future__ import annotations

import json
import re
import signal
import sqlite3
from collections import Counter
from pathlib import Path

import msgpack
import redis

from millstream.engine import redis_keys
from tests.integration.cluster import Cluster
from tests.integration.slot_lost import capture_slot_lost_report

PROGRAMS = Path(__file__).parent / "programs"


def _job_id(output: str) -> str:
    return re.findall(r"^Job ([0-9a-f]{32}) ", output, re.M)[0]


def _restart_jobmanager(cluster: Cluster) -> None:
    assert cluster.jobmanager is not None
    cluster.jobmanager.send_signal(signal.SIGKILL)  # works on a stopped process too
    cluster.jobmanager.wait()
    cluster.start_jobmanager()


def _attempts(cluster: Cluster, jid: str) -> list[int]:
    job = cluster.job(jid)
    return sorted(
        st["attempt"] for v in job["vertices"] for st in cluster.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]
    )


def _exceptions(cluster: Cluster, jid: str) -> list[dict]:
    return cluster.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]


def test_a_slot_lost_report_copied_before_a_restart_is_refused_after_it(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "checkpointed_count.py", "100000000", "2000", options=("-p", "4", "--detached"))
    assert res.returncode == 0, res.stderr
    jid = _job_id(res.stdout)
    try:
        _replay_slot_lost_across_a_restart(cluster, jid)
    finally:  # the module's other test needs the slots
        if cluster.job(jid)["state"] not in ("FINISHED", "FAILED", "CANCELED"):
            cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
        cluster.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"), 30)


def _replay_slot_lost_across_a_restart(cluster: Cluster, jid: str) -> None:
    def checkpoints() -> int:
        return cluster.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]

    cluster.wait_running(jid)
    cluster.wait_for(lambda: checkpoints() >= 2, 60, "checkpoints")
    rds = redis.Redis.from_url(cluster.redis_url)
    report = capture_slot_lost_report(cluster)  # the JobManager acts on the genuine one: the job fails over
    cluster.wait_for(lambda: _exceptions(cluster, jid), 30, "the genuine slot loss")
    cluster.wait_running(jid, 60)
    done = checkpoints()
    cluster.wait_for(lambda: checkpoints() > done, 60, "a checkpoint of the new attempt")
    _restart_jobmanager(cluster)
    # The new JobManager adopts the attempt that runs (issue 18): the copied report below is sealed for
    # the old epoch all the same.
    cluster.wait_for(lambda: cluster.job(jid)["state"] == "RUNNING" and min(_attempts(cluster, jid)) >= 1, 90, "the adopted job")
    cluster.wait_running(jid, 60)
    cluster.wait_processing(jid)
    before, failures = _attempts(cluster, jid), len(_exceptions(cluster, jid))
    log = cluster.workdir / "jobmanager.log"

    def refusals() -> int:
        return log.read_text(errors="replace").count("sealed for epoch")

    refused = refusals()
    rds.rpush(redis_keys.JOBMANAGER_INBOX, report)  # well within the 10-minute replay window
    # Progress, not a pause: the JobManager took the copy from its inbox and logged a refusal.
    cluster.wait_for(
        lambda: rds.lpos(redis_keys.JOBMANAGER_INBOX, report) is None and refusals() > refused, 30,
        "the JobManager to refuse the copied report",
    )
    assert cluster.job(jid)["state"] == "RUNNING"
    assert _attempts(cluster, jid) == before, "the copied report failed the job over"
    assert len(_exceptions(cluster, jid)) == failures


def test_a_print_line_copied_after_a_restart_does_not_show_again(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "printing.py", "streaming", "200", options=("--detached",))
    assert res.returncode == 0, res.stderr
    jid = _job_id(res.stdout)
    cluster.wait_state(jid, ("FINISHED",), 60)
    read = cluster.http.get(f"/jobs/{jid}/stdout").json()  # a client reads the whole stream
    assert "map saw 50" in " ".join(read["lines"])
    _restart_jobmanager(cluster)
    rds = redis.Redis.from_url(cluster.redis_url)
    stream = redis_keys.job_stdout(jid)
    rds.rpush(stream, rds.lindex(stream, 0))  # a genuine line the client was shown, pushed again
    rds.incr(redis_keys.job_stdout_total(jid))
    rest = cluster.http.get(f"/jobs/{jid}/stdout", params={"offset": read["total"]}).json()  # the client goes on
    assert rest["lines"] == [], rest["lines"]
    # The job ended: its output kept in SQL answers (the stream's count no longer moves), or Redis
    # still does and counts the copy's position without showing it.
    assert rest["total"] in (read["total"], read["total"] + 1)
    again = cluster.http.get(f"/jobs/{jid}/stdout").json()
    assert again["lines"] == read["lines"]


def test_a_result_entry_copied_across_a_restart_reaches_the_client_once(cluster: Cluster, tmp_path: Path) -> None:
    """A collect entry the client read is copied; the JobManager restarts; the copy is pushed behind
    the entries the client has still to read. The client gets every update once and succeeds (it used
    to fail with "replayed entry", or, with no later entry of that writer left, get the copy)."""
    out, paused, resume = tmp_path / "out.json", tmp_path / "paused", tmp_path / "resume"
    known = cluster.job_ids()
    run = cluster.start_run(
        PROGRAMS / "slow_collected_count.py", "4000", "2000", str(out), "100", str(paused), str(resume),
        options=("-p", "2"),
    )
    try:
        jid = cluster.wait_new_job(known)
        rds = redis.Redis.from_url(cluster.redis_url)
        key = redis_keys.collect(jid)
        copied: list[bytes] = []
        cluster.wait_for(lambda: copied.extend(rds.lrange(key, 0, 0)) or copied, 30, "an entry")
        cluster.wait_for(paused.exists, 60, "the client to read 100 updates and stop")
        cluster.wait_state(jid, ("FINISHED",), 60)  # every result written, most of them unread
        _restart_jobmanager(cluster)
        rds.rpush(key, copied[0])  # a genuine entry the client has read, pushed again
        resume.touch()
        _, stderr = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, " ".join(stderr.split())[-2000:]
    received = [tuple(u) for u in json.loads(out.read_text())]
    dupes = [u for u, n in Counter(received).items() if n > 1]
    assert not dupes, dupes[:5]
    assert sorted(received) == sorted((f"k{k}", n) for k in range(40) for n in range(1, 101))
    log = (cluster.workdir / "jobmanager.log").read_text(errors="replace")
    assert "left out a replayed entry of job " + jid in log


def test_a_result_entry_copied_after_its_writer_was_fully_acknowledged_is_left_out_after_a_restart(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The client read and acknowledged every entry (the list is empty) before the JobManager restarted;
    an entry copied while the job ran is pushed after the restart. A reader asking from the client's
    offset gets nothing (it used to get the copy: nothing left in the list told the new JobManager
    that writer's entries had been read)."""
    out = tmp_path / "out.json"
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "collected_count.py", "2000", "2000", str(out))
    try:
        jid = cluster.wait_new_job(known)
        rds = redis.Redis.from_url(cluster.redis_url)
        key, meta = redis_keys.collect(jid), redis_keys.collect_meta(jid)
        copied: list[bytes] = []
        cluster.wait_for(lambda: copied.extend(rds.lrange(key, 0, 0)) or copied, 30, "an entry")
        _, stderr = run.communicate(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, " ".join(stderr.split())[-2000:]
    assert rds.llen(key) == 0  # the client's last fetch acknowledged every entry
    offset = int(rds.hget(meta, "acked"))
    # What was read is recorded in the JobManager's SQL too, where no Redis writer can reset it: the
    # collect sink's one writer, up to its last entry (tests/backend/test_stream_marks.py resets Redis).
    with sqlite3.connect(cluster.workdir / "var" / "millstream.db") as db:
        marks = db.execute("SELECT writer, high FROM collect_marks WHERE jid = ?", (jid,)).fetchall()
    assert len(marks) == 1 and marks[0][1] == offset - 1, (marks, offset)
    _restart_jobmanager(cluster)
    rds.rpush(key, copied[0])
    r = cluster.http.get(f"/jobs/{jid}/results", params={"offset": offset})
    assert r.status_code == 200, r.text
    body = msgpack.unpackb(r.content, raw=False)
    assert body["batches"] == [] and body["next-offset"] == offset + 1, body
    log = (cluster.workdir / "jobmanager.log").read_text(errors="replace")
    assert "left out a replayed entry of job " + jid in log
