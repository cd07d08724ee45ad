"""The exactly-once proof of issue 13, in one run on a real cluster started by ``millstream cluster
start`` (which restarts whatever dies): a checkpointed keyed count, written to an exactly-once
FileSink by one job and collected by execute_and_collect in another, while the test SIGKILLs 10
TaskManager processes, the JobManager twice and the embedded Redis once, at random moments. Every
update must be in the sink's committed files exactly once and reach the client exactly once, in
order. Prints the fault counts and the longest time until both jobs ran again."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.integration.cluster import Cluster
from tests.integration.test_launcher import _role_pids
from tests.integration.test_recovery import committed_counts

PROGRAM = Path(__file__).parent / "programs" / "chaos_count.py"
N = 30_000
RATE = 250  # records per second: N takes two minutes of running, enough for every fault to land midway
HEARTBEAT_TIMEOUT_MS = 2000
# 3 TaskManagers x 2 slots for two jobs of parallelism 2: after a kill the jobs restart on the
# survivors' free slots, as on a cluster with spare capacity, not after a new process has started.
TASKMANAGERS = 3
FAULTS = ["taskmanager"] * 10 + ["jobmanager"] * 2 + ["redis"]


def _subtasks(c: Cluster, jid: str) -> list[dict]:
    return [st for v in c.job(jid)["vertices"] for st in c.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]]


def _attempt(c: Cluster, jid: str) -> int:
    """The job's current attempt, or -1 while every one of its tasks runs no attempt at all."""
    return max((st["attempt"] for st in _subtasks(c, jid)), default=-1)


def _all_running(c: Cluster, jid: str) -> bool:
    """Every task of the job has started (running, or done: sources that read all their input)."""
    if c.job(jid)["state"] != "RUNNING":
        return False
    states = [st["status"] for st in _subtasks(c, jid)]
    return "RUNNING" in states and all(s in ("RUNNING", "FINISHED") for s in states)


def _completed(c: Cluster, jid: str) -> int:
    return c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]


def _kill(fault: str, launcher: int, data_dir: Path, rng: random.Random) -> None:
    if fault == "redis":
        pid = int((data_dir / "valkey" / "valkey.pid").read_text().strip())
    else:
        pid = rng.choice(_role_pids(launcher, fault))
    os.kill(pid, signal.SIGKILL)


def assert_every_update_once(collected: Path, out: Path, n: int, keys: int = 40) -> dict[str, list[int]]:
    """The chaos program's outputs (tests/integration/programs/chaos_count.py): the client received
    every update of the keyed count exactly once and in order per key, and the FileSink committed each
    exactly once. Returns the client's updates per key."""
    received = [tuple(u) for u in json.loads(collected.read_text())]
    dupes = [u for u, k in Counter(received).items() if k > 1]
    assert not dupes, f"client: {len(received) - len(set(received))} duplicates, e.g. {dupes[:5]}"
    per_key: dict[str, list[int]] = {}
    for key, count in received:
        per_key.setdefault(key, []).append(count)
    want = list(range(1, n // keys + 1))
    assert sorted(per_key) == sorted(f"k{k}" for k in range(keys))
    bad = {k: len(v) for k, v in per_key.items() if v != want}
    assert not bad, f"client: keys with missing or reordered updates: {bad}"
    files = committed_counts(out)
    assert sorted(files) == sorted(per_key), "sink: keys missing from the committed files"
    missing = {k: sorted(set(want) - set(v))[:5] for k, v in files.items() if set(want) - set(v)}
    assert not missing, f"sink: keys with missing updates: {missing}"
    extra = {k: len(v) - len(want) for k, v in files.items() if len(v) != len(want)}
    assert not extra, f"sink: keys with updates committed more than once: {extra}"
    return per_key


def test_every_update_exactly_once_through_taskmanager_jobmanager_and_redis_kills(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)  # its port, env and helpers only
    env = dict(c.env)
    env.pop("REDIS_URL")  # the launcher starts (and restarts) its own embedded Redis
    data_dir = Path(env["MILLSTREAM_DATA_DIR"])
    rng = random.Random(1313)
    faults = FAULTS[:]
    rng.shuffle(faults)
    launcher = c.launch("--taskmanagers", str(TASKMANAGERS), "--slots", "2", env=env)
    out, collected = tmp_path / "out", tmp_path / "collected.json"
    run = None
    recoveries: list[tuple[str, float]] = []
    try:
        c.wait_for(lambda: c.overview()["taskmanagers"] >= TASKMANAGERS, 90, "the launched cluster to come up")
        run = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), str(N), str(RATE), str(out), str(collected)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        c.wait_for(lambda: len(c.job_ids()) == 2, 60, "the two jobs")
        jobs = sorted(c.job_ids())
        for fault in faults:
            for jid in jobs:
                c.wait_for(lambda: _all_running(c, jid), 90, f"job {jid} to run")
            before = {jid: _completed(c, jid) for jid in jobs}
            c.wait_for(lambda: all(_completed(c, j) > before[j] for j in jobs), 30, "a checkpoint of each job")
            attempts = {jid: _attempt(c, jid) for jid in jobs}
            time.sleep(rng.uniform(0.1, 1.5))  # a random moment between checkpoints
            assert all(c.job(j)["state"] == "RUNNING" for j in jobs), "a job ended before every fault landed; raise N"
            _kill(fault, launcher.pid, data_dir, rng)
            killed_at = time.monotonic()

            def recovered(jid: str) -> bool:
                if _attempt(c, jid) > attempts[jid]:
                    return _all_running(c, jid)
                # A TaskManager that ran none of this job's tasks: still running once the loss would show.
                quiet = time.monotonic() - killed_at > HEARTBEAT_TIMEOUT_MS / 1000 + 4
                return fault == "taskmanager" and quiet and _all_running(c, jid)

            try:
                c.wait_for(lambda: all(recovered(j) for j in jobs), 120, f"both jobs to run again after a {fault} kill")
            except AssertionError:
                for j in jobs:
                    print(j, c.job(j)["state"], [(st["attempt"], st["status"]) for st in _subtasks(c, j)], attempts)
                if run.poll() is not None:
                    print("millstream run ended:", run.stderr.read()[-3000:] if run.stderr else "")
                raise
            recoveries.append((fault, time.monotonic() - killed_at))
            print(f"{fault} kill: both jobs ran again after {recoveries[-1][1]:.1f} s", flush=True)
            assert launcher.poll() is None, "the launcher gave up"

        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]
        assert_every_update_once(collected, out, N)
        for jid in jobs:
            assert c.job(jid)["state"] == "FINISHED"
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        log = c.stop_launcher(launcher)
        c.http.close()
        c.redis.stop()
    counts = Counter(f for f, _ in recoveries)
    worst = max(recoveries, key=lambda r: r[1])
    print(
        f"\nchaos: {counts['taskmanager']} TaskManager, {counts['jobmanager']} JobManager and {counts['redis']} Redis "
        f"SIGKILLs; longest time to RUNNING again {worst[1]:.1f} s (after a {worst[0]} kill); "
        + ", ".join(f"{f} {t:.1f}s" for f, t in recoveries)
    )
    assert counts == Counter(FAULTS)
    assert log.count("starting it again") >= len(FAULTS), log[-3000:]  # the launcher restarted each one
