"""A TaskManager advertises the host it is given (``--host`` or ``MILLSTREAM_TASKMANAGER_HOST``;
``auto`` is its machine's host name), and REST, the dashboard and the JobManager's log show that,
not 127.0.0.1. The JobManager warns about a TaskManager whose checkpoint directory is not its own."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration


def test_taskmanagers_show_the_host_they_advertise(tmp_path: Path):
    (tmp_path / "c").mkdir()
    cluster = Cluster(tmp_path / "c")
    try:
        cluster.start_jobmanager()
        starts = [
            (["--host", "tm-a.test"], {}),
            # ... and a checkpoint directory that is not the JobManager's: the JobManager warns.
            ([], {"MILLSTREAM_TASKMANAGER_HOST": "tm-b.test",
                  "MILLSTREAM_CHECKPOINT_DIR": str(tmp_path / "elsewhere")}),
            ([], {"MILLSTREAM_TASKMANAGER_HOST": "auto"}),
        ]
        for i, (args, env) in enumerate(starts):
            log = open(tmp_path / f"tm-{i}.log", "ab")
            cluster.taskmanagers.append(subprocess.Popen(
                [sys.executable, "-m", "millstream.backend.cli", "taskmanager", "--slots", "1", *args],
                env={**cluster.env, **env}, stdout=log, stderr=subprocess.STDOUT,
            ))
        cluster.wait_for(lambda: cluster.overview()["taskmanagers"] == 3, 60, "three TaskManagers")
        tms = cluster.http.get("/taskmanagers").json()["taskmanagers"]
        hosts = sorted(tm["path"].split("/")[2] for tm in tms)
        assert hosts == sorted(["tm-a.test", "tm-b.test", socket.gethostname()]), tms
        for tm in tms:
            host = tm["path"].split("/")[2]
            assert tm["id"].startswith(f"{host}:")  # ids (and so log lines naming them) carry it too
            detail = cluster.http.get(f"/taskmanagers/{tm['id']}").json()
            assert detail["path"] == tm["path"]
        page = cluster.http.get("/ui/taskmanagers").text
        for host in ("tm-a.test", "tm-b.test", socket.gethostname()):
            assert f"<td>{host}</td>" in page, page
        assert "<td>127.0.0.1</td>" not in page
        jm_log = (tmp_path / "c" / "jobmanager.log").read_text()
        assert "registered with 1 slots" in jm_log and "on tm-a.test" in jm_log
        warnings = [line for line in jm_log.splitlines() if "uses checkpoint directory" in line]
        assert len(warnings) == 1 and "on tm-b.test" in warnings[0] and str(tmp_path / "elsewhere") in warnings[0], warnings
    finally:
        cluster.stop()


def test_the_log_of_a_taskmanager_whose_file_is_elsewhere_reaches_rest_and_the_dashboard(tmp_path: Path):
    """A TaskManager on another host has no log file on the JobManager's disk: its processes ship
    their log lines through Redis, sealed, and REST and the dashboard show them; a line pushed by
    someone with only the Redis URL is left out."""
    from millstream.engine import redis_keys

    c = Cluster(tmp_path)
    try:
        c.start(taskmanagers=1, slots=1)  # started without --log-file: nothing for the JobManager to read
        (tm,) = [t["id"] for t in c.http.get("/taskmanagers").json()["taskmanagers"]]
        res = c.run(Path(__file__).parent / "programs" / "rolling_count.py", "2000", options=("-p", "1"))
        assert res.returncode == 0, res.stderr[-2000:]
        redis.Redis.from_url(c.redis_url).rpush(redis_keys.taskmanager_log(tm), b"FORGED line from an attacker")

        def shipped() -> bool:
            r = c.http.get(f"/taskmanagers/{tm}/log")
            return r.status_code == 200 and f"TaskManager {tm} starting with 1 slots" in r.text

        c.wait_for(shipped, 30, "the TaskManager's shipped log")
        text = c.http.get(f"/taskmanagers/{tm}/log").text
        assert "FORGED" not in text
        page = c.http.get(f"/ui/taskmanagers/{tm}").text
        assert "starting with 1 slots" in page and "FORGED" not in page
    finally:
        c.stop()
