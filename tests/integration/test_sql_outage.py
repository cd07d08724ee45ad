"""The SQL database goes away under a running cluster (PostgreSQL, a database of its own): new
connections are refused and every open one is terminated, as when the server dies. A checkpointed job
keeps running and completing checkpoints; REST reads that need SQL answer 503 with a clear message
(never a 500); reads of the running job answer from memory; the job is cancelled meanwhile. Once the
database accepts connections again, everything written meanwhile (the job's states, its checkpoints'
statistics, its end) is in SQL."""
from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Iterator

import psycopg
import pytest

from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
OUTAGE_S = 3.0


@pytest.fixture
def database() -> Iterator[str]:
    try:
        psycopg.connect(ADMIN, connect_timeout=2).close()
    except psycopg.OperationalError:
        pytest.skip("PostgreSQL is not reachable at 127.0.0.1:5432")
    name = f"ms_outage_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _set_reachable(name: str, reachable: bool) -> None:
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"true" if reachable else "false"}')
        if not reachable:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))


def _completed(c: Cluster, jid: str) -> int:
    return c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"]


def test_jobs_keep_running_while_sql_is_away_and_what_happened_is_stored_after(tmp_path: Path, database: str) -> None:
    c = Cluster(tmp_path, database_url=f"postgresql+psycopg://postgres@127.0.0.1:5432/{database}")
    run = None
    try:
        c.start(taskmanagers=1, slots=2)
        run = c.start_run(PROGRAMS / "checkpointed_count.py", "100000000", "500", options=("-p", "2"))
        jid = c.wait_new_job(set())
        c.wait_running(jid)
        c.wait_for(lambda: _completed(c, jid) >= 2, 30, "checkpoints")

        _set_reachable(database, False)
        away = time.monotonic()
        before = _completed(c, jid)
        r = c.http.get("/jobs/overview")  # the stored history is needed: 503, said plainly
        assert r.status_code == 503, r.text
        assert "the SQL database is unavailable" in r.json()["errors"][0] and r.headers["Retry-After"]
        r = c.http.get(f"/jobs/{jid}/exceptions")
        assert r.status_code == 503 and "SQL database is unavailable" in r.text, r.text
        # The running job answers from memory and keeps checkpointing.
        c.wait_for(lambda: _completed(c, jid) >= before + 3, 20, "checkpoints while SQL is away")
        assert c.job(jid)["state"] == "RUNNING"
        during = _completed(c, jid)
        assert c.http.patch(f"/jobs/{jid}", params={"mode": "cancel"}).status_code == 202
        c.wait_for(lambda: c.job(jid)["state"] == "CANCELED", 30, "the cancel while SQL is away")
        while time.monotonic() - away < OUTAGE_S:
            assert c.http.get("/overview").status_code in (200, 503)  # never a 500
            time.sleep(0.2)
        _set_reachable(database, True)
        back = time.monotonic()
        c.wait_for(lambda: c.http.get("/jobs/overview").status_code == 200, 20, "REST reads after SQL is back")
        stored_after = time.monotonic() - back

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{database}") as db:
            (state,) = db.execute("SELECT state FROM jobs WHERE jid = %s", (jid,)).fetchone()
            ids = [r[0] for r in db.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE jid = %s AND status = 'COMPLETED'", (jid,)
            ).fetchall()]
        assert state == "CANCELED"
        assert len(ids) >= during, (len(ids), during)  # the ones completed while SQL was away too
        assert [j["state"] for j in c.http.get("/jobs/overview").json()["jobs"] if j["jid"] == jid] == ["CANCELED"]
        log = (tmp_path / "jobmanager.log").read_text()
        assert "keeping job history writes in memory until it is back" in log
        assert "Traceback" not in log, log[-3000:]
        print(f"\nSQL away {back - away:.1f} s: {during - before} checkpoints completed meanwhile; "
              f"history stored and REST reading it {stored_after:.2f} s after it was back")
    finally:
        if run is not None and run.poll() is None:
            run.kill()
        c.stop()
