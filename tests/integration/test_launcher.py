"""``millstream cluster start`` as a user runs it: the launcher restarts a dead JobManager and leaves
its TaskManagers running, so a checkpointed job resumes and finishes with exact results."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path


from tests.integration.cluster import Cluster

PROGRAM = Path(__file__).parent / "programs" / "recovering_count.py"
N = 60_000


def _children(pid: int) -> dict[int, str]:
    """The child processes of ``pid`` with their command lines, read from /proc."""
    out: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == pid:
            out[int(entry)] = cmdline
    return out


def _role_pids(launcher: int, role: str) -> list[int]:
    return sorted(p for p, cmd in _children(launcher).items() if f"millstream.backend.cli {role}" in cmd)


def test_the_launcher_restarts_a_killed_jobmanager_and_keeps_its_taskmanagers(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)  # only its Redis, port and environment are used
    launcher = c.launch("--taskmanagers", "2", "--slots", "2")
    run = None
    try:
        c.wait_for(lambda: c.overview()["taskmanagers"] >= 2, 90, "the launched cluster to come up")
        (jobmanager,) = _role_pids(launcher.pid, "jobmanager")
        taskmanagers = _role_pids(launcher.pid, "taskmanager")
        assert len(taskmanagers) == 2
        run = c.start_run(PROGRAM, str(N), "4000", options=("-p", "2"))
        jid = c.wait_new_job(set())
        c.wait_for(lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 2, 60, "checkpoints")

        os.kill(jobmanager, signal.SIGKILL)
        c.wait_for(lambda: _role_pids(launcher.pid, "jobmanager") not in ([], [jobmanager]), 30, "a new JobManager")
        assert launcher.poll() is None, "the launcher exited with the JobManager"

        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err[-3000:]
        final = json.loads(next(ln for ln in out.splitlines() if ln.startswith("[")))
        assert sorted(final) == sorted([f"k{i}", N // 40] for i in range(40)), final[:5]
        assert c.job(jid)["state"] == "FINISHED"
        # The same TaskManager processes ran the job on: the launcher left them alone (the new
        # JobManager adopts their running tasks, or restores them from a checkpoint if one had ended;
        # test_recovery.py checks the adoption itself).
        assert _role_pids(launcher.pid, "taskmanager") == taskmanagers
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        printed = c.stop_launcher(launcher)
        c.http.close()
        c.redis.stop()
    assert "starting it again" in printed
