"""Two JobManager apps with high availability on one real Redis and one SQLite file: one leads, the
other stands by; the route, the dashboard badge, and what a standby does while no leader answers."""
from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import redis
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.settings import Settings
from millstream.engine import redis_keys
from millstream.engine.jobmanager.leader_election import seal_lease
from millstream.engine.jobmanager.leader_lease import Lease
from tests.backend.test_rest_api import submit


SECRET = "leadership-test-secret"  # one cluster: its JobManagers share the secret that seals the lease


def _app(redis_url: str, tmp_path: Path, port: int) -> TestClient:
    settings = Settings(
        redis_url=redis_url, data_dir=tmp_path, heartbeat_interval_ms=200, high_availability=True,
        leader_lease_ms=3000, port=port, cluster_secret=SECRET,
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


class _Listener:
    """A socket an attacker listens on, recording every connection made to it (and dropping it)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, socket.timeout):
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.received.append(conn.recv(65536))
                except OSError:
                    self.received.append(b"")

    def received_so_far(self, timeout: float = 10.0) -> list[bytes]:
        """Every connection made before this call, recorded: a probe of ours queues behind them (one
        accept loop, a first-in first-out backlog), so once the probe is recorded they all are. The
        probe itself is left out."""
        probe = b"probe-" + os.urandom(8).hex().encode()
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(probe)
        deadline = time.monotonic() + timeout
        while probe not in self.received:
            assert time.monotonic() < deadline, "the listener never recorded our probe"
            time.sleep(0.01)
        return [r for r in self.received if not r.startswith(b"probe-")]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def test_a_standby_never_forwards_to_a_lease_forged_in_redis(redis_url: str, tmp_path: Path) -> None:
    """Issue 14: someone who can write to Redis (not knowing the cluster secret) names their own
    address in the leader lease. The standby must not send it anything, least of all the token."""
    listener = _Listener()
    client = redis.Redis.from_url(redis_url)
    token = "the-operators-token"
    try:
        forged = Lease(10**6, f"http://127.0.0.1:{listener.port}", int(time.time() * 1000))
        for value in (forged.encode(), seal_lease("not this cluster's secret", forged).value()):
            # Held long enough that the JobManager below cannot take the lease: it stays a standby.
            client.set(redis_keys.JOBMANAGER_LEADER, value, px=60_000)
            settings = Settings(
                redis_url=redis_url, data_dir=tmp_path, heartbeat_interval_ms=200, high_availability=True,
                leader_lease_ms=3000, port=18097, cluster_secret=SECRET, auth_token=token,
            )
            with TestClient(create_app(settings), base_url="http://testserver") as standby:
                auth = {"Authorization": f"Bearer {token}", "Cookie": "ms_session=secret-cookie"}
                info = standby.get("/jobmanager/leader", headers=auth).json()
                assert info["role"] == "standby" and info["address"] is None, info
                # A read is answered here from SQL, as when no leader answers ...
                r = standby.get("/jobs/overview", headers=auth)
                assert r.status_code == 200 and r.headers["x-millstream-served-by"] == "standby"
                # ... and a mutation waits for a leader.
                r = standby.patch(f"/jobs/{'0' * 32}", params={"mode": "cancel"}, headers=auth)
                assert r.status_code == 503 and r.headers["retry-after"] == "1"
            received = listener.received_so_far()  # what the standby sent before our probe: nothing
            assert received == [], received
    finally:
        client.delete(redis_keys.JOBMANAGER_LEADER)
        client.close()
        listener.close()
