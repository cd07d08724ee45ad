"""The exactly-once chaos test on a data plane sharded over three Redis servers (issue 18):
``millstream cluster start --data-redis 3`` runs the control Redis and three embedded data servers;
the chaos program's two jobs (exactly-once FileSink, and execute_and_collect to the client) run while
the test SIGKILLs the busiest data server once, at a random moment between checkpoints, and one
TaskManager. The launcher starts the server again on its port (empty); the jobs whose channels were
on it fail and restart from their latest checkpoints. Every update must be committed exactly once
and reach the client exactly once, in order. Prints the time until both jobs ran again."""
from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import redis

from tests.integration.cluster import Cluster
from tests.integration.chaos import assert_every_update_once, finish_chaos_program, land_faults, start_chaos_program
from tests.integration.test_launcher import _role_pids

N = 12_000
RATE = 250  # records per second: about 50 s of input, long enough for both faults to land midway
HEARTBEAT_TIMEOUT_MS = 2000
TASKMANAGERS = 3
DATA_SERVERS = 3


def _data_server(data_dir: Path, i: int) -> tuple[int, redis.Redis]:
    """The pid of embedded data server ``i`` and a client (its port and password are in its config)."""
    d = data_dir / f"valkey-data-{i}"
    conf = dict(
        line.split(None, 1) for line in (d / "valkey.conf").read_text().splitlines() if line.strip() and " " in line
    )
    password = conf.get("requirepass", "").strip().strip('"') or None
    client = redis.Redis(host="127.0.0.1", port=int(conf["port"]), password=password, socket_timeout=5)
    return int((d / "valkey.pid").read_text().strip()), client


def _pushes(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_rpush", {}).get("calls", 0))


def test_every_update_exactly_once_when_one_of_three_data_servers_is_killed(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)  # its port, env and helpers only
    env = dict(c.env)
    env.pop("REDIS_URL")  # the launcher starts its own control Redis, and the data servers
    data_dir = Path(env["MILLSTREAM_DATA_DIR"])
    rng = random.Random(1818)
    faults = ["data-redis", "taskmanager"]
    rng.shuffle(faults)
    launcher = c.launch(
        "--taskmanagers", str(TASKMANAGERS), "--slots", "2", "--data-redis", str(DATA_SERVERS), env=env
    )
    out, collected = tmp_path / "out", tmp_path / "collected.json"
    run = None
    try:
        c.wait_for(lambda: c.overview()["taskmanagers"] >= TASKMANAGERS, 90, "the launched cluster to come up")
        run, jobs = start_chaos_program(c, env, N, RATE, out, collected)

        def kill(fault: str) -> None:
            if fault == "data-redis":
                servers = [_data_server(data_dir, i) for i in range(DATA_SERVERS)]
                pushes = [_pushes(cl) for _, cl in servers]
                # The channels really are spread: more than one server carries data.
                assert sum(1 for p in pushes if p > 0) >= 2, pushes
                victim = max(range(DATA_SERVERS), key=lambda i: pushes[i])  # the busiest: it surely holds channels
                os.kill(servers[victim][0], signal.SIGKILL)
                for _, cl in servers:
                    cl.close()
            else:
                os.kill(rng.choice(_role_pids(launcher.pid, "taskmanager")), signal.SIGKILL)
            assert launcher.poll() is None, "the launcher gave up"

        # A job with no channel on the killed server (or no task on the killed TaskManager) keeps
        # running: settled once a failure would have shown.
        recoveries = land_faults(
            c, run, jobs, faults, rng, kill, quiet_after_s=HEARTBEAT_TIMEOUT_MS / 1000 + 4, may_spare=lambda _: True,
        )
        restarted_by_data_kill = sum(r.failed_over for r in recoveries if r.fault == "data-redis")
        finish_chaos_program(run)
        # The busiest server held channels of at least one job: that job failed over and restored.
        assert restarted_by_data_kill >= 1
        restored = sum(c.http.get(f"/jobs/{j}/checkpoints").json()["counts"]["restored"] for j in jobs)
        assert restored >= 1
        assert_every_update_once(collected, out, N)
        for jid in jobs:
            assert c.job(jid)["state"] == "FINISHED"
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        log = c.stop_launcher(launcher)
        c.http.close()
        c.redis.stop()
    print(
        "\nchaos on 3 data servers: " + ", ".join(f"{r.fault} kill: RUNNING again after {r.seconds:.1f} s" for r in recoveries)
        + f"; jobs failed over by the data server kill: {restarted_by_data_kill}"
    )
    assert "the embedded data Redis" in log and "starting it again" in log, log[-3000:]
    assert "Data Redis servers:" in log
