"""Failure recovery on real processes: TaskManagers SIGKILLed while an exactly-once job runs."""
from __future__ import annotations

import json
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
            [sys.executable, "-m", "backend.cli", "run", "-p", "2", str(PROGRAM), str(N), "6000", str(out_dir)],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        c.wait_for(lambda: c.http.get("/jobs/overview").json()["jobs"], 30, "the job to be submitted")
        jid = c.http.get("/jobs/overview").json()["jobs"][0]["jid"]
        def attempt_running(attempt: int) -> bool:
            job = c.job(jid)
            subtasks = [
                st for v in job["vertices"] for st in c.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]
            ]
            return len(subtasks) == 4 and all(st["attempt"] == attempt and st["status"] == "RUNNING" for st in subtasks)

        kills = 0
        completed_before = 0
        while kills < 3:
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
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            kills += 1
            c.start_taskmanager(slots=2)  # the supervisor's part: a fresh TaskManager replaces it
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err[-3000:]
        assert kills == 3
        final = json.loads(next(ln for ln in out.splitlines() if ln.startswith("[")))
        # Every key reached exactly N/40: no update lost, none counted twice.
        assert sorted(final) == sorted([f"k{i}", N // 40] for i in range(40)), final[:5]
        # The FileSink's committed files hold every update exactly once: per key 1..N/40, no gap, no repeat.
        written = committed_counts(out_dir)
        assert sorted(written) == sorted(f"k{i}" for i in range(40))
        bad = {k: v for k, v in written.items() if sorted(v) != list(range(1, N // 40 + 1))}
        assert not bad, {k: (len(v), len(set(v))) for k, v in list(bad.items())[:5]}
        entries = c.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]
        lost = [e for e in entries if e["exceptionName"] == "TaskManagerLostException"]
        assert len(lost) >= 3, [e["exceptionName"] for e in entries]
        assert c.job(jid)["state"] == "FINISHED"
        # A restart from scratch would also end with exact counts: prove each attempt resumed
        # from a completed checkpoint (sources rewound to its offsets, counts from its state).
        stats = c.http.get(f"/jobs/{jid}/checkpoints").json()
        assert stats["counts"]["restored"] >= 3, (stats["counts"], [(e["exceptionName"], e["timestamp"], e["stacktrace"][:80]) for e in entries])
        assert stats["latest"]["restored"] is not None
    finally:
        c.stop()


def test_a_killed_jobmanager_resumes_its_job_from_the_latest_checkpoint(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    try:
        c.start(taskmanagers=2, slots=2)
        run = subprocess.Popen(
            [sys.executable, "-m", "backend.cli", "run", "-p", "2", str(PROGRAM), str(N), "6000"],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        c.wait_for(lambda: c.http.get("/jobs/overview").json()["jobs"], 30, "the job to be submitted")
        jid = c.http.get("/jobs/overview").json()["jobs"][0]["jid"]
        c.wait_for(lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 2, 60, "checkpoints")
        taskmanagers = list(c.taskmanagers)
        c.jobmanager.send_signal(signal.SIGKILL)
        c.jobmanager.wait()
        time.sleep(1.0)
        c.start_jobmanager()
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err[-3000:]
        final = json.loads(next(ln for ln in out.splitlines() if ln.startswith("[")))
        assert sorted(final) == sorted([f"k{i}", N // 40] for i in range(40)), final[:5]
        job = c.job(jid)
        assert job["state"] == "FINISHED"
        # The TaskManagers were not restarted: the same processes re-registered with the new JobManager.
        assert all(p.poll() is None for p in taskmanagers)
        stats = c.http.get(f"/jobs/{jid}/checkpoints").json()
        assert stats["counts"]["restored"] >= 1, stats["counts"]
    finally:
        c.stop()
