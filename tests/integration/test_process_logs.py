"""What `millstream cluster start` writes under <data_dir>/log, as in Flink: each process's log
(``.log``: job events, task failures with their traceback, each task line naming its job and
attempt, no request lines) apart from what user code prints (``.out``)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"


def _job(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 0, res.stderr[-3000:]
    return re.findall(r"^Job ([0-9a-f]{32}) ", res.stdout, re.M)[0]


def test_logs_and_stdout_go_to_their_own_files(tmp_path: Path) -> None:
    c = Cluster(tmp_path)  # its Redis, port and environment; the launcher starts the processes
    launcher = c.launch("--taskmanagers", "1", "--slots", "2")
    logs = tmp_path / "var" / "log"
    try:
        c.wait_for(lambda: c.overview()["taskmanagers"] >= 1, 90, "the launched cluster to come up")
        failing = _job(c.run(PROGRAMS / "failing.py", options=("-p", "2", "--detached")))
        c.wait_state(failing, ("FAILED",), 60)
        printing = _job(c.run(PROGRAMS / "printing.py", options=("-p", "1", "--detached")))
        c.wait_state(printing, ("FINISHED",), 60)
        for _ in range(20):
            c.overview()  # requests: none of them may show in the log

        jm = (logs / "jobmanager.log").read_text()
        assert f"({failing}) switched from state FAILING to FAILED (ValueError: record 777 is cursed)" in jm
        assert f"({printing}) switched from state RUNNING to FINISHED" in jm
        assert "HTTP/1.1" not in jm and "GET /overview" not in jm, "request lines are off by default"
        assert c.http.get("/jobmanager/log").text.strip().endswith(jm.strip().splitlines()[-1])

        tm_log = (logs / "taskmanager-0.log").read_text()
        failed = [ln for ln in tm_log.splitlines() if "switched from RUNNING to FAILED" in ln]
        assert failed and all(f"[job {failing[:8]} #0]" in ln for ln in failed), failed
        assert "ValueError: record 777 is cursed" in tm_log and "Traceback" in tm_log
        tm_out = (logs / "taskmanager-0.out").read_text()
        assert "map saw 50" in tm_out and "map saw 50" not in tm_log  # print() goes to .out only
    finally:
        c.stop_launcher(launcher)
        c.http.close()
        c.redis.stop()
