"""Checkpoint failures on a real cluster (issue 13, item 5): a checkpoint that expires once fails the
attempt it belongs to, and only that one: the job restarts once and then finishes."""
from __future__ import annotations

import re
from pathlib import Path

from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
N = 3000


def test_a_checkpoint_that_expires_once_restarts_the_job_once_and_it_finishes(cluster: Cluster, tmp_path: Path) -> None:
    marker = tmp_path / "stalled"
    res = cluster.run(PROGRAMS / "stalled_checkpoint.py", str(N), str(marker), options=("-p", "2"), timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert marker.exists()  # the stall happened
    jid = re.findall(r"^Job ([0-9a-f]{32}) ", res.stdout, re.M)[0]
    job = cluster.job(jid)
    assert job["state"] == "FINISHED"
    entries = cluster.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]
    causes = [e["exceptionName"] for e in entries]
    assert causes.count("CheckpointException") == 1, causes  # before the fix: one per attempt, no end
    assert "tolerable failure threshold" in next(e for e in entries if e["exceptionName"] == "CheckpointException")["stacktrace"]
    subtasks = [
        st for v in job["vertices"] for st in cluster.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]
    ]
    assert {st["attempt"] for st in subtasks} == {1}  # exactly one restart
    stats = cluster.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]
    assert stats["failed"] >= 1
