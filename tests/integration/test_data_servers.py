"""A cluster started by hand with MILLSTREAM_DATA_REDIS_URLS (two external data servers): a job's data
crosses both and its result is exact; a TaskManager given another list refuses the job's tasks with
an error that says so, rather than putting channels where nobody reads them."""
from __future__ import annotations

import json
from pathlib import Path

import redis

from millstream.backend.embedded_redis import redis_url_of
from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"


def _pushes(server) -> int:
    client = redis.Redis.from_url(redis_url_of(server))
    try:
        return int(client.info("commandstats").get("cmdstat_rpush", {}).get("calls", 0))
    finally:
        client.close()


def test_a_job_runs_over_two_data_servers_and_its_result_is_exact(tmp_path: Path, data_servers: list) -> None:
    c = Cluster(tmp_path / "c")
    c.env["MILLSTREAM_DATA_REDIS_URLS"] = ",".join(redis_url_of(s) for s in data_servers)
    try:
        c.start(taskmanagers=2, slots=2)
        done = c.run(PROGRAMS / "rolling_count.py", "20000", "50", options=("-p", "2"))
        assert done.returncode == 0, done.stderr[-3000:]
        final: dict[str, int] = {}
        for line in done.stdout.splitlines():
            if line.startswith("["):
                word, count = json.loads(line)
                final[word] = max(final.get(word, 0), count)
        assert final == {f"w{k}": 400 for k in range(50)}
        # Four channels source -> count (and their credits) over two servers: both carried data.
        assert all(_pushes(s) > 0 for s in data_servers), [_pushes(s) for s in data_servers]
    finally:
        c.stop()


def test_a_taskmanager_with_other_data_servers_refuses_tasks(tmp_path: Path, data_servers: list) -> None:
    c = Cluster(tmp_path / "c")
    try:
        # The JobManager has two data servers; the TaskManager has none (channels on REDIS_URL).
        c.env["MILLSTREAM_DATA_REDIS_URLS"] = ",".join(redis_url_of(s) for s in data_servers)
        c.start_jobmanager()
        del c.env["MILLSTREAM_DATA_REDIS_URLS"]
        c.start_taskmanager(2)
        c.wait_for(lambda: c.overview()["taskmanagers"] >= 1, 60, "the TaskManager to register")
        done = c.run(PROGRAMS / "rolling_count.py", "1000", "10", options=("-p", "2"), timeout=120)
        assert done.returncode != 0
        (jid,) = c.job_ids()
        entries = c.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]
        assert any(e["exceptionName"] == "DataServersMismatch" for e in entries), entries
        assert "MILLSTREAM_DATA_REDIS_URLS (unset) is not the JobManager's (fingerprint" in json.dumps(entries)
    finally:
        c.stop()
