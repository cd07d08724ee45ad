"""What the chaos tests share: the chaos program's two jobs on a launched cluster, the loop that lands
each fault at a random moment between checkpoints and waits for the jobs to run again, and the
exactly-once check of their outputs (tests/integration/programs/chaos_count.py)."""
from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tests.integration.cluster import Cluster
from tests.integration.test_recovery import committed_counts

PROGRAM = Path(__file__).parent / "programs" / "chaos_count.py"


def subtasks(c: Cluster, jid: str) -> list[dict]:
    return [st for v in c.job(jid)["vertices"] for st in c.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]]


def attempt(c: Cluster, jid: str) -> int:
    """The job's current attempt, or -1 while every one of its tasks runs no attempt at all."""
    return max((st["attempt"] for st in subtasks(c, jid)), default=-1)


def all_running(c: Cluster, jid: str) -> bool:
    """Every task of the job has started (running, or done: sources that read all their input)."""
    if c.job(jid)["state"] != "RUNNING":
        return False
    states = [st["status"] for st in subtasks(c, jid)]
    return "RUNNING" in states and all(s in ("RUNNING", "FINISHED") for s in states)


def completed(c: Cluster, jid: str) -> int:
    return c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]


def start_chaos_program(c: Cluster, env: dict[str, str], n: int, rate: int, out: Path, collected: Path) -> tuple[subprocess.Popen, list[str]]:
    """``millstream run`` of the chaos program (its two jobs at parallelism 2), once both are submitted."""
    run = subprocess.Popen(
        [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), str(n), str(rate), str(out), str(collected)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    c.wait_for(lambda: len(c.job_ids()) == 2, 60, "the two jobs")
    return run, sorted(c.job_ids())


@dataclass(frozen=True)
class Recovery:
    fault: str
    seconds: float  # until the jobs that failed over ran again (or the quiet wait, if none did)
    failed_over: int  # how many of the jobs restarted


def land_faults(
    c: Cluster, run: subprocess.Popen, jobs: list[str], faults: list[str], rng: random.Random,
    kill: Callable[[str], None], quiet_after_s: float, may_spare: Callable[[str], bool],
) -> list[Recovery]:
    """For each fault in turn: wait until both jobs run and each completed a checkpoint, wait a random
    moment, ``kill(fault)``, and wait until both run again. A job the fault did not touch (no task on
    the killed TaskManager, no channel on the killed server) counts as recovered once it still runs
    ``quiet_after_s`` later, for faults where ``may_spare(fault)``."""
    recoveries = []
    for fault in faults:
        for jid in jobs:
            c.wait_for(lambda: all_running(c, jid), 90, f"job {jid} to run")
        before = {jid: completed(c, jid) for jid in jobs}
        c.wait_for(lambda: all(completed(c, j) > before[j] for j in jobs), 30, "a checkpoint of each job")
        attempts = {jid: attempt(c, jid) for jid in jobs}
        time.sleep(rng.uniform(0.1, 1.5))  # a random moment between checkpoints
        assert all(c.job(j)["state"] == "RUNNING" for j in jobs), "a job ended before every fault landed; raise N"
        kill(fault)
        killed_at = time.monotonic()
        back: dict[str, float] = {}  # job that failed over -> seconds until it ran again

        def recovered(jid: str) -> bool:
            if attempt(c, jid) > attempts[jid]:
                if all_running(c, jid):
                    back.setdefault(jid, time.monotonic() - killed_at)
                    return True
                return False
            quiet = time.monotonic() - killed_at > quiet_after_s
            return may_spare(fault) and quiet and all_running(c, jid)

        try:
            c.wait_for(lambda: all(recovered(j) for j in jobs), 120, f"both jobs to run again after a {fault} kill")
        except AssertionError:
            for j in jobs:
                print(j, c.job(j)["state"], [(st["attempt"], st["status"]) for st in subtasks(c, j)], attempts)
            if run.poll() is not None:
                print("millstream run ended:", run.stderr.read()[-3000:] if run.stderr else "")
            raise
        recoveries.append(Recovery(fault, max(back.values(), default=time.monotonic() - killed_at), len(back)))
        print(f"{fault} kill: {len(back)} job(s) failed over, running again after {recoveries[-1].seconds:.1f} s", flush=True)
    return recoveries


def finish_chaos_program(run: subprocess.Popen) -> None:
    """The client ended cleanly after every fault."""
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]


def assert_every_update_once(collected: Path, out: Path, n: int, keys: int = 40) -> dict[str, list[int]]:
    """The chaos program's outputs: the client received every update of the keyed count exactly once
    and in order per key, and the FileSink committed each exactly once. Returns the client's updates
    per key."""
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
