"""Two JobManager apps with high availability on one real Redis and one SQLite file: one leads, the
other stands by; the route, the dashboard badge, and what a standby does while no leader answers."""
from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.settings import Settings
from tests.backend.test_rest_api import submit


def _app(redis_url: str, tmp_path: Path, port: int) -> TestClient:
    settings = Settings(
        redis_url=redis_url, data_dir=tmp_path, heartbeat_interval_ms=200, high_availability=True,
        leader_lease_ms=3000, port=port,
    )
    return TestClient(create_app(settings), base_url="http://testserver")


def _wait(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_one_leads_one_stands_by_and_the_standby_says_so(redis_url: str, tmp_path: Path) -> None:
    # Port 9 (discard) on loopback: nothing listens there, so the standby cannot reach this "leader".
    with _app(redis_url, tmp_path, 9) as first:
        _wait(lambda: first.get("/jobmanager/leader").json()["role"] == "leader")
        with _app(redis_url, tmp_path, 18099) as second:
            _wait(lambda: "http://127.0.0.1:18099" in first.get("/jobmanager/leader").json()["standbys"])
            info = second.get("/v1/jobmanager/leader").json()
            assert info["address"] == "http://127.0.0.1:9" and info["role"] == "standby"
            assert info["self"] == "http://127.0.0.1:18099" and isinstance(info["leaderSince"], int)
            assert info["fencingToken"] >= 1

            # The leader's dashboard says it leads; the standby's names the leader.
            # (waited for: on a loaded machine a renewal can be late for a moment, and the badge says so)
            _wait(lambda: "Leader: this JobManager" in first.get("/ui/").text)
            _wait(lambda: "Standby · leader:" in second.get("/ui/").text)
            assert 'href="http://127.0.0.1:9/ui/"' in second.get("/ui/").text

            # A job submitted to the leader is in SQL: the standby, unable to reach the leader, reads it there.
            graph = submit(first, parallelism=1)
            r = second.get(f"/jobs/{graph.job_id}")
            assert r.status_code == 200 and r.json()["jid"] == graph.job_id
            assert r.headers["x-millstream-served-by"] == "standby"
            # ... but makes no change itself: mutations and live reads wait for a leader.
            r = second.patch(f"/jobs/{graph.job_id}", params={"mode": "cancel"})
            assert r.status_code == 503 and r.headers["retry-after"] == "1"
            assert second.get(f"/jobs/{graph.job_id}/results", params={"offset": 0}).status_code == 503
            assert first.get(f"/jobs/{graph.job_id}").json()["state"] == "CREATED"  # no TaskManager: it waits

        # The leader shuts down and gives the lease back: the next JobManager takes over at once.
    with _app(redis_url, tmp_path, 18098) as third:
        _wait(lambda: third.get("/jobmanager/leader").json()["role"] == "leader", 5)
        assert third.get("/jobmanager/leader").json()["fencingToken"] > info["fencingToken"]
        # It resumed the job from SQL (waiting for slots, as before).
        assert third.get(f"/jobs/{graph.job_id}").json()["state"] == "CREATED"
