"""The exactly-once proof of issue 13, in one run on a real cluster started by ``millstream cluster
start`` (which restarts whatever dies): a checkpointed keyed count, written to an exactly-once
FileSink by one job and collected by execute_and_collect in another, while the test SIGKILLs, at
random moments, 2 TaskManager processes, the JobManager once and the embedded Redis once over 14,000
records (`make test`), or 10 TaskManager processes, the JobManager twice and Redis once over 30,000
records (the long variant `make bench` runs). Every update must be in the sink's committed files exactly
once and reach the client exactly once, in order. Prints the fault counts and the longest time until
both jobs ran again."""
from __future__ import annotations

import os
import random
import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.chaos import assert_every_update_once, finish_chaos_program, land_faults, start_chaos_program
from tests.integration.cluster import Cluster
from tests.integration.test_launcher import _role_pids

RATE = 250  # records per second of running: about 9 s of input per fault lets every fault land midway
HEARTBEAT_TIMEOUT_MS = 2000
# 3 TaskManagers x 2 slots for two jobs of parallelism 2: after a kill the jobs restart on the
# survivors' free slots, as on a cluster with spare capacity, not after a new process has started.
TASKMANAGERS = 3
# (records, faults): `make test` lands every kind of fault (two TaskManager kills, so one lands on a
# job that already failed over); `make bench` runs the long one.
SCALES = {
    "short": (14_000, ["taskmanager"] * 2 + ["jobmanager"] + ["redis"]),
    "full": (30_000, ["taskmanager"] * 10 + ["jobmanager"] * 2 + ["redis"]),
}


def _kill(fault: str, launcher: int, data_dir: Path, rng: random.Random) -> None:
    if fault == "redis":
        pid = int((data_dir / "valkey" / "valkey.pid").read_text().strip())
    else:
        pid = rng.choice(_role_pids(launcher, fault))
    os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("scale", ["short", pytest.param("full", marks=pytest.mark.full)])
def test_every_update_exactly_once_through_taskmanager_jobmanager_and_redis_kills(tmp_path: Path, scale: str) -> None:
    n, planned = SCALES[scale]
    c = Cluster(tmp_path, heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)  # its port, env and helpers only
    env = dict(c.env)
    env.pop("REDIS_URL")  # the launcher starts (and restarts) its own embedded Redis
    data_dir = Path(env["MILLSTREAM_DATA_DIR"])
    rng = random.Random(1313)
    faults = planned[:]
    rng.shuffle(faults)
    launcher = c.launch("--taskmanagers", str(TASKMANAGERS), "--slots", "2", env=env)
    out, collected = tmp_path / "out", tmp_path / "collected.json"
    run = None
    try:
        c.wait_for(lambda: c.overview()["taskmanagers"] >= TASKMANAGERS, 90, "the launched cluster to come up")
        run, jobs = start_chaos_program(c, env, n, RATE, out, collected)

        def kill(fault: str) -> None:
            _kill(fault, launcher.pid, data_dir, rng)
            assert launcher.poll() is None, "the launcher gave up"

        # A TaskManager that ran none of a job's tasks leaves it running, and a restarted JobManager
        # adopts the tasks that still run (issue 18): settled once a failure would have shown.
        recoveries = land_faults(
            c, run, jobs, faults, rng, kill, quiet_after_s=HEARTBEAT_TIMEOUT_MS / 1000 + 4,
            may_spare=lambda fault: fault in ("taskmanager", "jobmanager"),
        )
        finish_chaos_program(run)
        assert_every_update_once(collected, out, n)
        for jid in jobs:
            assert c.job(jid)["state"] == "FINISHED"
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        log = c.stop_launcher(launcher)
        c.http.close()
        c.redis.stop()
    counts = Counter(r.fault for r in recoveries)
    worst = max(recoveries, key=lambda r: r.seconds)
    print(
        f"\nchaos: {counts['taskmanager']} TaskManager, {counts['jobmanager']} JobManager and {counts['redis']} Redis "
        f"SIGKILLs; longest time to RUNNING again {worst.seconds:.1f} s (after a {worst.fault} kill); "
        + ", ".join(f"{r.fault} {r.seconds:.1f}s" for r in recoveries)
    )
    assert counts == Counter(planned)
    assert log.count("starting it again") >= len(planned), log[-3000:]  # the launcher restarted each one
