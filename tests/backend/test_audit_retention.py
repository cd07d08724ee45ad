"""The audit log's retention and its rate limit on refused anonymous requests (real SQLite;
the flood test on a real app with a token)."""
from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.persistence.audit_log import AuditEntry, AuditLog
from millstream.backend.persistence.database import make_engine, make_session_factory, upgrade_database
from millstream.backend.settings import Settings

DAY_MS = 86_400_000


def sessions(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    upgrade_database(url)
    return make_session_factory(make_engine(url))


def entry(ts: int, status: int = 200, actor: str = "token", client: str = "10.0.0.1") -> AuditEntry:
    return AuditEntry(timestamp=ts, actor=actor, action="submit", method="POST", path="/jobs", status=status, client=client)


def test_rows_older_than_the_retention_are_deleted(tmp_path: Path):
    factory = sessions(tmp_path)
    now = int(time.time() * 1000)
    log = AuditLog(factory, retention_days=30)
    for age_days in (45, 31, 29, 1):
        log.record(entry(now - age_days * DAY_MS))
    assert log.purge(now) == 2
    assert sorted((now - e.timestamp) // DAY_MS for e in log.recent()) == [1, 29]
    log.record(entry(now - 40 * DAY_MS))
    AuditLog(factory, retention_days=30)  # a JobManager start purges too
    assert len(log.recent()) == 2


def test_refused_anonymous_requests_are_recorded_at_a_bounded_rate(tmp_path: Path):
    log = AuditLog(sessions(tmp_path), refusals_per_minute=3)
    minute = (int(time.time() * 1000) // 60_000) * 60_000
    for i in range(50):
        log.record(entry(minute + i, status=401, actor="anonymous"))
    log.record(entry(minute + 100, status=401, actor="anonymous", client="10.0.0.2"))  # another client has its own budget
    log.record(entry(minute + 200, status=202))  # authenticated requests are always recorded
    assert [e.client for e in log.recent() if e.status == 401] == ["10.0.0.2"] + ["10.0.0.1"] * 3
    log.record(entry(minute + 60_000, status=401, actor="anonymous"))  # the client's next minute
    newest = log.recent(2)
    assert newest[0].status == 401
    assert newest[1].action == "refusals-not-recorded" and newest[1].path.startswith("47 more refused requests")


def test_a_flood_of_unauthenticated_posts_adds_a_bounded_number_of_rows(redis_url: str, tmp_path: Path):
    settings = Settings(redis_url=redis_url, data_dir=tmp_path, cluster_secret="s", auth_token="tok",
                        audit_refusals_per_minute=5)
    with TestClient(create_app(settings)) as c:
        for _ in range(40):
            assert c.post("/jobs", files={"jobgraph": (None, "{}")}).status_code == 401
        entries = c.get("/audit", params={"limit": 1000}, headers={"Authorization": "Bearer tok"}).json()["entries"]
    refused = [e for e in entries if e["status"] == 401]
    assert 5 <= len(refused) <= 10, len(refused)  # 5 per minute; the flood may straddle one minute boundary
