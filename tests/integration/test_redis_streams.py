"""Redis Streams source and sink on a real cluster: a SIGKILL mid-stream, exactly-once output in the sink stream."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import redis

from millstream.backend.embedded_redis import start_embedded_redis
from tests.integration.cluster import Cluster

PROGRAM = Path(__file__).parent / "programs" / "redis_copy.py"
PER_STREAM = 15_000


def test_a_redis_stream_copy_killed_mid_stream_writes_every_entry_exactly_once(tmp_path: Path) -> None:
    # The user's Redis, password-protected, apart from the cluster's own.
    data = start_embedded_redis(tmp_path / "user-redis", password="hunter2")
    url = f"redis://:hunter2@{data.host}:{data.port}/0"
    client = redis.Redis.from_url(url)
    expected = []
    for stream in ("in-a", "in-b"):
        pipe = client.pipeline()
        for i in range(PER_STREAM):
            pipe.xadd(stream, {"value": f"{stream}-{i}"})
            expected.append(f"{stream}-{i}!")
        pipe.execute()
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    try:
        c.start(taskmanagers=2, slots=2)
        run = subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), url, "300"],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        c.wait_for(lambda: client.xlen("out") >= PER_STREAM // 4, 90, "a quarter of a stream committed")
        jid = c.http.get("/jobs/overview").json()["jobs"][0]["jid"]
        assert client.xlen("out") < PER_STREAM  # both readers are part-way through their stream
        victim = c.taskmanagers[1]
        c.replace_taskmanager(victim, slots=2)
        stdout, stderr = run.communicate(timeout=240)
        assert run.returncode == 0, stderr[-3000:]
        assert c.job(jid)["state"] == "FINISHED"
        assert c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["restored"] >= 1
        got = [f[b"value"].decode() for _, f in client.xrange("out")]
        assert len(got) == len(expected), (len(got), len(expected))
        assert Counter(got) == Counter(expected)
        # Each subtask's batches stay in order: a stream's entries appear in the order they were read.
        for stream in ("in-a", "in-b"):
            mine = [int(v.split("-")[2][:-1]) for v in got if v.startswith(stream)]
            assert mine == sorted(mine)
    finally:
        c.stop()
        client.close()
        data.stop()
