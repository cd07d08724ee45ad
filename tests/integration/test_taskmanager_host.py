"""A TaskManager advertises the host it is given (``--host`` or ``MILLSTREAM_TASKMANAGER_HOST``;
``auto`` is its machine's host name), and REST, the dashboard and the JobManager's log show that,
not 127.0.0.1. The JobManager warns about a TaskManager whose checkpoint directory is not its own."""
from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

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
                [sys.executable, "-m", "backend.cli", "taskmanager", "--slots", "1", *args],
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
