"""A JobManager takeover adopts the running tasks (issue 18), on real processes: three JobManagers with
``--ha`` (a 2 s lease), two TaskManagers, and the exactly-once keyed count writing to the FileSink.

1. The leader is SIGKILLed while the job checkpoints: the standby takes over and adopts the job as it
   runs. The slot processes keep their process ids, every subtask keeps its attempt, no task is
   deployed again, and checkpoints go on completing with ids after the old leader's.
2. The new leader is SIGKILLed together with a TaskManager: the tasks on it are gone, so the last
   JobManager does not adopt the job but restarts it from its latest checkpoint as a new attempt
   (the fallback).
The job's committed output is exactly once. Prints how long each takeover took."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from tests.integration.cluster import Cluster, consecutive_free_ports
from tests.integration.chaos import all_running as _all_running, subtasks as _subtasks
from tests.integration.test_recovery import committed_counts

PROGRAM = Path(__file__).parent / "programs" / "recovering_count.py"
N = 10_000
RATE = 500  # records per second: 20 s of input, time for both faults to land midway
LEASE_MS = 2000


def _role(url: str) -> str | None:
    try:
        return httpx.get(f"{url}/jobmanager/leader", timeout=2).json()["role"]
    except (httpx.HTTPError, ValueError, KeyError):
        return None


def _latest_completed(c: Cluster, jid: str) -> int:
    latest = (c.http.get(f"/jobs/{jid}/checkpoints").json().get("latest") or {}).get("completed")
    return latest["id"] if latest else 0


def _slot_pids(tm: subprocess.Popen) -> set[int]:
    return {p.pid for p in psutil.Process(tm.pid).children(recursive=True)}


def test_a_takeover_adopts_the_running_tasks_and_restarts_only_when_a_taskmanager_died(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    port = consecutive_free_ports(3)
    urls = [f"http://127.0.0.1:{port + i}" for i in range(3)]
    c.env.update(MILLSTREAM_HIGH_AVAILABILITY="true", MILLSTREAM_LEADER_LEASE_MS=str(LEASE_MS),
                 MILLSTREAM_JOBMANAGER=",".join(urls))
    jms: dict[str, subprocess.Popen] = {}

    def start_jobmanager(url: str) -> None:
        env = {**c.env, "MILLSTREAM_PORT": url.rsplit(":", 1)[1]}
        log = open(tmp_path / f"jobmanager-{url.rsplit(':', 1)[1]}.log", "ab")
        jms[url] = subprocess.Popen([sys.executable, "-m", "millstream.backend.cli", "jobmanager"], env=env,
                                    stdout=log, stderr=subprocess.STDOUT)

    def switch_to(url: str) -> None:
        c.http.close()
        c.http = httpx.Client(base_url=url, timeout=10)

    def leader(among: list[str]) -> str | None:
        return next((u for u in among if _role(u) == "leader"), None)

    def log_of(url: str) -> str:
        return (tmp_path / f"jobmanager-{url.rsplit(':', 1)[1]}.log").read_text()

    out = tmp_path / "out"
    run = None
    try:
        start_jobmanager(urls[0])
        c.wait_for(lambda: _role(urls[0]) == "leader", 60, "the first JobManager to lead")
        start_jobmanager(urls[1])
        start_jobmanager(urls[2])
        switch_to(urls[0])
        tms = [c.start_taskmanager(2), c.start_taskmanager(2)]
        c.wait_for(lambda: c.overview()["taskmanagers"] == 2, 60, "the TaskManagers")
        c.wait_for(lambda: _role(urls[1]) == _role(urls[2]) == "standby", 60, "the others to stand by")
        run = c.start_run(PROGRAM, str(N), str(RATE), str(out), options=("-p", "2"))
        c.wait_for(lambda: c.job_ids(), 60, "the job")
        (jid,) = c.job_ids()
        c.wait_for(lambda: _all_running(c, jid) and _latest_completed(c, jid) >= 2, 60, "a running, checkpointed job")

        # 1. The leader dies alone: the standby adopts the job.
        before = {st["subtask"]: st["attempt"] for st in _subtasks(c, jid)}
        pids = [_slot_pids(tm) for tm in tms]
        last_id = _latest_completed(c, jid)
        jms[urls[0]].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        c.wait_for(lambda: leader(urls[1:]), 30, "a standby to take over")
        took = time.monotonic() - killed
        second = leader(urls[1:])
        switch_to(second)
        assert c.job(jid)["state"] == "RUNNING" and _all_running(c, jid)
        attempts = [st["attempt"] for st in _subtasks(c, jid)]
        assert set(attempts) == set(before.values()) == {0}, f"redeployed: {before} -> {attempts}"
        c.wait_for(lambda: _latest_completed(c, jid) > last_id + 1, 30, "checkpoints to go on completing")
        assert [_slot_pids(tm) for tm in tms] == pids, "a slot process was replaced"
        assert {st["attempt"] for st in _subtasks(c, jid)} == {0}
        history = [h for h in c.http.get(f"/jobs/{jid}/checkpoints").json()["history"] if h["status"] == "COMPLETED"]
        ids = sorted(h["id"] for h in history)
        assert ids == sorted(set(ids)) and max(ids) > last_id
        new_log = log_of(second)
        assert "adopted attempt 0" in new_log, new_log[-3000:]
        assert "resumes as attempt" not in new_log and "restarts as attempt" not in new_log
        print(f"\nleader SIGKILLed: the standby led, the job adopted, after {took:.1f} s", flush=True)

        # 2. The new leader dies with a TaskManager: the job restarts from its checkpoint.
        assert c.job(jid)["state"] == "RUNNING", "the job ended before the second fault; raise N"
        jms[second].send_signal(signal.SIGKILL)
        tms[0].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        (third,) = [u for u in urls[1:] if u != second]
        c.wait_for(lambda: _role(third) == "leader", 30, "the last standby to take over")
        switch_to(third)
        c.wait_for(lambda: _all_running(c, jid) and min(st["attempt"] for st in _subtasks(c, jid)) > 0, 60,
                   "the job to run again as a new attempt")
        print(f"leader and a TaskManager SIGKILLed: the job ran again as a new attempt after "
              f"{time.monotonic() - killed:.1f} s", flush=True)
        log = log_of(third)
        assert "is not adopted" in log and "resumes as attempt" in log, log[-3000:]

        _, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr[-3000:]
        assert c.job(jid)["state"] == "FINISHED"
        files = committed_counts(out)
        want = list(range(1, N // 40 + 1))
        assert sorted(files) == sorted(f"k{k}" for k in range(40))
        wrong = {k: (len(v), len(set(v))) for k, v in files.items() if sorted(v) != want}
        assert not wrong, f"keys whose updates were not committed exactly once: {wrong}"
    except BaseException:
        for p in sorted(tmp_path.glob("jobmanager-*.log")):
            lines = [ln for ln in p.read_text(errors="replace").splitlines() if "HTTP/1.1" not in ln]
            print(f"--- {p.name}", *lines[-40:], sep="\n")
        raise
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        for p in jms.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in jms.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        c.stop()
