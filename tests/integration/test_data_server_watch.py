"""The leading JobManager watches the data Redis servers (issue 18): a real cluster on two embedded data
servers runs a restarting job; one server that holds the job's channels is SIGKILLed. REST
(``/cluster/data-servers``), Prometheus (``flink_jobmanager_dataServer_up``) and the dashboard's overview
say it is down, the log says so once; the job's restart waits for the server instead of deploying attempts
that would fail one after another (if its next attempt has channels there), and runs again once the
server is started again, which REST, Prometheus and the log then report as back."""
from __future__ import annotations

import os
import re
import signal
import time
import zlib
from pathlib import Path

import redis

from millstream.backend.embedded_redis import redis_url_of, restart_embedded_redis
from millstream.engine import redis_keys
from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
# Checks of the dead server (one per 2 s interval) the job's restart must sit out without deploying.
CHECKS_WHILE_HELD = 2


def _channels(server, jid: str) -> set[tuple[int, int, int]]:
    """(edge, src, dst) of attempt 0's channels that live on ``server`` (their buffer or credit lists)."""
    client = redis.Redis.from_url(redis_url_of(server))
    try:
        pattern = redis_keys.ATTEMPT_CHANNELS_PATTERN.format(job=jid, attempt=0)
        return {tuple(int(p) for p in k.decode().rsplit(":", 3)[1:]) for k in client.scan_iter(pattern)}
    finally:
        client.close()


def _status(c: Cluster, index: int) -> str:
    return c.http.get("/cluster/data-servers").json()["servers"][index]["status"]


def _last_check(c: Cluster, index: int) -> int:
    """When the JobManager's monitor last PINGed the server (ms): a new value is a new check."""
    return c.http.get("/cluster/data-servers").json()["servers"][index]["lastCheck"]


def _up_gauge(c: Cluster, index: int) -> float | None:
    m = re.search(rf'flink_jobmanager_dataServer_up{{[^}}]*server="{index}"[^}}]*}} (\S+)', c.http.get("/metrics").text)
    return float(m.group(1)) if m else None


def _attempts(c: Cluster, jid: str) -> set[int]:
    job = c.job(jid)
    out = set()
    for v in job["vertices"]:
        detail = c.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()
        out |= {st["attempt"] for st in detail["subtasks"]}
    return out


def test_a_dead_data_server_is_reported_and_restarts_wait_for_it(tmp_path: Path, data_servers: list) -> None:
    c = Cluster(tmp_path / "c")
    c.env["MILLSTREAM_DATA_REDIS_URLS"] = ",".join(redis_url_of(s) for s in data_servers)
    c.env["MILLSTREAM_DATA_REDIS_CHECK_INTERVAL_MS"] = "2000"  # the default: a failed task makes it check at once
    run = None
    try:
        c.start(taskmanagers=1, slots=2)
        body = c.http.get("/cluster/data-servers").json()
        assert [s["status"] for s in body["servers"]] == ["UP", "UP"] and body["down"] == 0
        assert body["servers"][0]["address"] == f"127.0.0.1:{data_servers[0].port}/0"
        run = c.start_run(PROGRAMS / "unbounded_restarting.py", options=("-p", "2"))
        jid = c.wait_new_job(set())
        c.wait_running(jid)
        c.wait_for(lambda: any(_channels(s, jid) for s in data_servers), 30, "the job's channels")
        used = [i for i, s in enumerate(data_servers) if _channels(s, jid)]
        pairs = set().union(*(_channels(s, jid) for s in data_servers))
        # Where attempt 1 puts the same channels (data_servers.shard_of): the victim should be one of those.
        next_servers = {zlib.crc32(redis_keys.channel(jid, 1, *p).encode()) % 2 for p in pairs}
        victim = next((i for i in used if i in next_servers), used[0])
        held = victim in next_servers

        os.kill(data_servers[victim].pid, signal.SIGKILL)
        killed = time.monotonic()
        c.wait_for(lambda: _status(c, victim) == "DOWN", 10, "REST to say the server is down")
        noticed = time.monotonic() - killed
        assert _status(c, 1 - victim) == "UP"
        assert c.http.get("/cluster/data-servers").json()["servers"][victim]["error"]
        assert _up_gauge(c, victim) == 0.0 and _up_gauge(c, 1 - victim) == 1.0
        page = c.http.get("/ui/").text
        assert f'data-index="{victim}" data-status="DOWN"' in page and "1 of 2 data servers is down" in page
        if held:
            c.wait_for(lambda: "waiting to restart" in c.job(jid).get("status-message", ""), 15, "the restart to wait")
            assert f"data server {victim}" in c.job(jid)["status-message"]
            # While the server is away the job stays RESTARTING and deploys nothing (200 ms restart delay:
            # without the hold it would have deployed and failed several attempts by now). Waited on the
            # monitor's progress, not on a clock: the JobManager has PINGed the dead server, found it down
            # and kept the hold, CHECKS_WHILE_HELD more times (REST's ``lastCheck`` moves at each check).
            checks = {_last_check(c, victim)}
            while len(checks) <= CHECKS_WHILE_HELD:
                assert c.job(jid)["state"] == "RESTARTING", f"deployed with the server down, after {len(checks)} checks"
                assert _status(c, victim) == "DOWN"
                checks.add(_last_check(c, victim))
                assert time.monotonic() - killed < 60, f"the monitor checked only {len(checks)} times in 60 s"
                time.sleep(0.2)
            assert c.job(jid)["state"] == "RESTARTING"
        else:
            c.wait_running(jid, 30)  # attempt 1 has no channel on the dead server: nothing to wait for
        restart_embedded_redis(data_servers[victim])
        c.wait_for(lambda: _status(c, victim) == "UP", 10, "REST to say the server is back")
        assert _up_gauge(c, victim) == 1.0
        c.wait_running(jid, 30)
        assert _attempts(c, jid) == {1}, "one failure, one restart: no attempt was spent on the dead server"
        assert "status-message" not in c.job(jid)
        log = (tmp_path / "c" / "jobmanager.log").read_text()
        address = f"127.0.0.1:{data_servers[victim].port}/0"
        assert log.count(f"millstream.dataservers data server {victim} ({address}) is down") == 1, log[-3000:]
        assert log.count(f"millstream.dataservers data server {victim} ({address}) is back") == 1, log[-3000:]
        print(f"\ndata server killed: REST said DOWN after {noticed:.2f} s; restart held: {held}")
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        c.stop()
