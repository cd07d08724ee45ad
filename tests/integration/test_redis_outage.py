"""A Redis outage on a real cluster with an external Redis: while it is away the REST API still
answers job reads and ``millstream run`` waits with one line; once it is back (a new, empty server
on the same port) the JobManager fails the job over to its latest checkpoint and every collected
update reaches the client exactly once (the collect sink holds each checkpoint's barrier until the
client has read the records it covers, so none is lost with Redis)."""
from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

from backend.embedded_redis import restart_embedded_redis
from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
N = 24_000


def test_a_job_survives_redis_dying_and_coming_back_empty(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    out = tmp_path / "received.json"
    run = None
    try:
        c.start(taskmanagers=2, slots=2)
        run = c.start_run(PROGRAMS / "collected_count.py", str(N), "1500", str(out), options=("-p", "2"))
        jid = c.wait_new_job(set())
        c.wait_for(lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 3, 60, "checkpoints")
        # A JobManager restart first: the resumed job's client has to survive the outage as well.
        c.jobmanager.kill()
        c.jobmanager.wait()
        c.start_jobmanager()
        c.wait_for(lambda: c.job(jid)["state"] == "RUNNING", 60, "the job to resume")
        c.wait_for(lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 6, 90, "checkpoints")
        port = c.redis.port
        os.kill(c.redis.pid, signal.SIGKILL)
        time.sleep(1.0)
        # Redis is away: reads answer from what the JobManager and SQL know, without live metrics.
        for _ in range(5):
            r = c.http.get(f"/jobs/{jid}")
            assert r.status_code == 200, r.text
            assert r.json()["state"] in ("RUNNING", "RESTARTING", "FAILING")
            assert c.http.get("/jobs/overview").status_code == 200
            assert c.http.get(f"/jobs/{jid}/checkpoints").status_code == 200
            time.sleep(0.4)
        assert run.poll() is None, "millstream run gave up while Redis was away"
        restart_embedded_redis(c.redis)
        assert c.redis.port == port

        stdout, stderr = run.communicate(timeout=180)
        assert run.returncode == 0, stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]
        assert "waiting for it" in stderr  # the one line instead of a traceback
        received = [tuple(u) for u in json.loads(out.read_text())]
        expected = {(f"k{k}", n) for k in range(40) for n in range(1, N // 40 + 1)}
        dupes = [u for u, n in Counter(received).items() if n > 1]
        assert not dupes, f"{len(received) - len(set(received))} duplicates, e.g. {dupes[:5]}"
        assert set(received) == expected, f"{len(expected - set(received))} missing"
        assert c.job(jid)["state"] == "FINISHED"
        assert c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["restored"] >= 1
        names = [e["exceptionName"] for e in c.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]]
        assert "RedisConnectionLost" in names, names
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        c.stop()
