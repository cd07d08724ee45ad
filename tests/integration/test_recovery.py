"""Failure recovery on real processes: TaskManagers SIGKILLed while an exactly-once job runs."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from tests.integration.cluster import Cluster

PROGRAM = Path(__file__).parent / "programs" / "recovering_count.py"
N = 120_000


# Each kill lands on an attempt that already restored (the second on a restored one); the chaos test
# (tests/integration/test_chaos.py) adds JobManager and Redis kills to the same path.
KILLS = 2

def committed_counts(out: Path) -> dict[str, list[int]]:
    """Every ``key,count`` line of the FileSink's committed (visible) part files, per key."""
    counts: dict[str, list[int]] = defaultdict(list)
    for dirpath, dirnames, names in os.walk(out):
        assert not [d for d in dirnames if d.startswith(".")]
        for name in names:
            if name.startswith("."):
                continue  # in-progress or pending: not output
            for line in Path(dirpath, name).read_text().splitlines():
                key, count = line.split(",")
                counts[key].append(int(count))
    return counts


def test_exactly_once_keyed_count_survives_repeated_taskmanager_kills(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    rng = random.Random(7)
    out_dir = tmp_path / "out"
    try:
        c.start(taskmanagers=2, slots=2)
        run = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), str(N), "6000", str(out_dir)],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        c.wait_for(lambda: c.http.get("/jobs/overview").json()["jobs"], 30, "the job to be submitted")
        jid = c.http.get("/jobs/overview").json()["jobs"][0]["jid"]
        def attempt_running(attempt: int) -> bool:
            job = c.job(jid)
            subtasks = [
                st for v in job["vertices"] for st in c.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]
            ]
            # 2 sources and 2 counters chained with the FileSink's writers
            return len(subtasks) == 4 and all(st["attempt"] == attempt and st["status"] == "RUNNING" for st in subtasks)

        kills = 0
        completed_before = 0
        while kills < KILLS:
            # Each kill hits a new attempt that is running and has completed a checkpoint of its own.
            c.wait_for(lambda: attempt_running(kills), 60, f"attempt {kills} to run")
            c.wait_for(
                lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] > completed_before,
                30,
                "a checkpoint of this attempt",
            )
            completed_before = c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]
            time.sleep(rng.uniform(0.2, 1.5))  # a random point of the run
            live = [p for p in c.taskmanagers if p.poll() is None]
            victim = rng.choice(live)
            c.replace_taskmanager(victim, slots=2)  # the supervisor's part: a fresh TaskManager replaces it
            kills += 1
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err[-3000:]
        assert kills == KILLS
        # The FileSink's committed files hold every update exactly once: per key 1..N/40, no gap, no
        # repeat, so every key reached exactly N/40 with no update lost or counted twice.
        written = committed_counts(out_dir)
        assert sorted(written) == sorted(f"k{i}" for i in range(40))
        bad = {k: v for k, v in written.items() if sorted(v) != list(range(1, N // 40 + 1))}
        assert not bad, {k: (len(v), len(set(v))) for k, v in list(bad.items())[:5]}
        entries = c.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]
        lost = [e for e in entries if e["exceptionName"] == "TaskManagerLostException"]
        assert len(lost) >= KILLS, [e["exceptionName"] for e in entries]
        assert c.job(jid)["state"] == "FINISHED"
        # A restart from scratch would also end with exact counts: prove each attempt resumed
        # from a completed checkpoint (sources rewound to its offsets, counts from its state).
        stats = c.http.get(f"/jobs/{jid}/checkpoints").json()
        assert stats["counts"]["restored"] >= KILLS, (stats["counts"], [(e["exceptionName"], e["timestamp"], e["stacktrace"][:80]) for e in entries])
        assert stats["latest"]["restored"] is not None
    finally:
        c.stop()


def test_a_killed_jobmanager_comes_back_and_adopts_its_running_job(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    out_dir = tmp_path / "out"
    try:
        c.start(taskmanagers=2, slots=2)
        run = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), str(N), "6000", str(out_dir)],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        c.wait_for(lambda: c.http.get("/jobs/overview").json()["jobs"], 30, "the job to be submitted")
        jid = c.http.get("/jobs/overview").json()["jobs"][0]["jid"]
        c.wait_for(lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 2, 60, "checkpoints")
        taskmanagers = list(c.taskmanagers)
        c.jobmanager.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        c.jobmanager.wait()
        time.sleep(1.0)
        c.start_jobmanager()
        c.wait_for(lambda: c.job(jid)["state"] in ("RUNNING", "FINISHED"), 60, "the job to be RUNNING again")
        back = time.monotonic() - killed  # the README's failure model quotes this (restart 1 s after the kill)
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err[-3000:]
        written = committed_counts(out_dir)
        assert sorted(written) == sorted(f"k{i}" for i in range(40))
        assert all(sorted(v) == list(range(1, N // 40 + 1)) for v in written.values())
        job = c.job(jid)
        assert job["state"] == "FINISHED"
        # The TaskManagers were not restarted: the same processes re-registered with the new JobManager.
        assert all(p.poll() is None for p in taskmanagers)
        stats = c.http.get(f"/jobs/{jid}/checkpoints").json()
        # The restarted JobManager adopted the running tasks (issue 18): nothing was restored.
        assert stats["counts"]["restored"] == 0, stats["counts"]
        assert "adopted attempt 0" in (c.workdir / "jobmanager.log").read_text(errors="replace")
        print(f"\nthe only JobManager SIGKILLed and started again 1 s later: job RUNNING {back:.1f} s after the kill", flush=True)
    finally:
        c.stop()


def test_at_least_once_mode_recovers_without_loss(tmp_path: Path) -> None:
    """Issue 4 test 4: unaligned barriers may count records twice after a restore, but never lose one."""
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    out_dir = tmp_path / "out"
    n = 60_000
    try:
        c.start(taskmanagers=2, slots=2)
        run = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), str(n), "5000", str(out_dir), "AT_LEAST_ONCE"],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        c.wait_for(lambda: c.http.get("/jobs/overview").json()["jobs"], 30, "the job to be submitted")
        jid = c.http.get("/jobs/overview").json()["jobs"][0]["jid"]
        assert c.http.get(f"/jobs/{jid}/checkpoints/config").json()["mode"] == "at_least_once"
        c.wait_for(lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 2, 60, "checkpoints")
        victim = c.taskmanagers[0]
        c.replace_taskmanager(victim, slots=2)
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err[-3000:]
        assert c.job(jid)["state"] == "FINISHED"
        assert c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["restored"] >= 1
        # No loss: the FileSink saw every count of every key from 1 up to at least N/40 (a replayed
        # record may have been counted twice, so duplicates and larger counts are allowed, gaps not).
        written = committed_counts(out_dir)
        assert sorted(written) == sorted(f"k{i}" for i in range(40))
        missing = {k: sorted(set(range(1, n // 40 + 1)) - set(v))[:5] for k, v in written.items()}
        assert not any(missing.values()), missing
    finally:
        c.stop()


def test_an_unwritable_checkpoint_directory_fails_checkpoints_then_the_job(tmp_path: Path) -> None:
    """Issue 4 test 5: each checkpoint fails with the cause; the job runs until the tolerable number is exceeded."""
    blocker = tmp_path / "a-file"
    blocker.write_text("checkpoints cannot go under a regular file, even for root\n")
    program = Path(__file__).parent / "programs" / "unwritable_checkpoints.py"
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    try:
        c.start(taskmanagers=1, slots=2)
        run = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(program), str(blocker / "chk"), "3"],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        c.wait_for(lambda: c.http.get("/jobs/overview").json()["jobs"], 30, "the job to be submitted")
        jid = c.http.get("/jobs/overview").json()["jobs"][0]["jid"]
        # The job keeps running while failures stay within the tolerable number.
        c.wait_for(lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["failed"] >= 1, 60, "a failed checkpoint")
        seen_running_after_failure = c.job(jid)["state"] == "RUNNING"
        run.communicate(timeout=120)
        assert run.returncode != 0
        job = c.wait_state(jid, ("FAILED",), 60)
        assert job["state"] == "FAILED"
        assert seen_running_after_failure
        stats = c.http.get(f"/jobs/{jid}/checkpoints").json()
        assert stats["counts"]["completed"] == 0
        assert stats["counts"]["failed"] >= 4, stats["counts"]  # 3 tolerated, the 4th in a row fails the job
        failed = [h for h in stats["history"] if h["status"] == "FAILED"]
        assert failed and all(h["failure_message"] for h in failed)
        # The cause names the directory and what is wrong with it.
        assert any("Not a directory" in h["failure_message"] and "a-file" in h["failure_message"] for h in failed), failed[0]
        entries = c.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]
        texts = [e["exceptionName"] + " " + e["stacktrace"] for e in entries]
        assert any("tolerable failure threshold" in t and "Not a directory" in t for t in texts), texts
    finally:
        c.stop()
