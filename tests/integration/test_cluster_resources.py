"""Slots and failures on real processes: waiting for resources, a SIGKILLed TaskManager, a JobManager restart."""
from __future__ import annotations

import os
import re
import signal
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy

from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
POSTGRES_ADMIN_URL = os.environ.get("MILLSTREAM_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def job_id(output: str) -> str:
    return re.findall(r"^Job ([0-9a-f]{32}) ", output, re.M)[0]


def test_job_waits_for_slots_then_starts_when_a_taskmanager_joins(tmp_path: Path) -> None:
    c = Cluster(tmp_path)
    try:
        c.start(taskmanagers=1, slots=2)
        res = c.run(PROGRAMS / "rolling_count.py", "3000", "10", "print", options=("-p", "4", "--detached"))
        jid = job_id(res.stdout)
        job = c.job(jid)
        assert job["state"] == "CREATED"
        # The scheduler tried and found too few slots (it says so), and the job stays waiting.
        c.wait_for(lambda: "slot" in (c.job(jid).get("status-message") or ""), 30, "the scheduler to report the missing slots")
        assert c.job(jid)["state"] == "CREATED"
        c.start_taskmanager(slots=2)
        job = c.wait_state(jid, ("FINISHED", "FAILED", "CANCELED"), 60)
        assert job["state"] == "FINISHED"
        # Slots were spread over both TaskManagers.
        tms = {st["taskmanager-id"] for v in job["vertices"] for st in c.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]}
        assert len(tms) == 2
    finally:
        c.stop()


def test_killed_taskmanager_is_detected_within_the_heartbeat_timeout(tmp_path: Path) -> None:
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    try:
        c.start(taskmanagers=2, slots=2)
        jid = job_id(c.run(PROGRAMS / "unbounded.py", options=("-p", "2", "--detached")).stdout)
        c.wait_for(lambda: c.job(jid)["status-counts"]["RUNNING"] == 4, 60, "all tasks running")
        victim = c.taskmanagers[0]
        killed_at = time.time()
        victim.send_signal(signal.SIGKILL)
        job = c.wait_state(jid, ("FAILED",), 30)
        detected_after = time.time() - killed_at
        assert detected_after < 3.0 + 5.0, f"detection took {detected_after:.1f}s"
        entries = c.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]
        assert any("TaskManager" in e["stacktrace"] and "no heartbeat" in e["stacktrace"] for e in entries)
        assert job["state"] == "FAILED"
        c.wait_for(lambda: c.overview()["taskmanagers"] == 1, 10, "the dead TaskManager to be dropped")
    finally:
        c.stop()


def _postgres_database() -> str | None:
    """A fresh PostgreSQL database for one test, or None when no server is reachable."""
    name = f"ms_it_{uuid.uuid4().hex[:10]}"
    try:
        eng = sqlalchemy.create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
        with eng.connect() as conn:
            conn.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
        eng.dispose()
    except Exception:
        return None
    return POSTGRES_ADMIN_URL.rsplit("/", 1)[0] + "/" + name


def _drop_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    eng = sqlalchemy.create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(sqlalchemy.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    eng.dispose()


# SQLite's run of the same path is in `make bench` (and in every other test's cluster); `make test`
# keeps the PostgreSQL one, the database a deployment shares between JobManagers.
@pytest.mark.parametrize("database", [pytest.param("sqlite", marks=pytest.mark.full), "postgresql"])
def test_job_history_survives_a_jobmanager_restart(tmp_path: Path, database: str) -> None:
    url = None
    if database == "postgresql":
        url = _postgres_database()
        if url is None:
            pytest.skip("no PostgreSQL reachable")
    c = Cluster(tmp_path, database_url=url)
    try:
        c.start(taskmanagers=1, slots=2)
        res = c.run(PROGRAMS / "batch_reduce.py", options=("-p", "2"))
        assert res.returncode == 0, res.stderr
        jid = job_id(res.stdout)
        c.jobmanager.send_signal(signal.SIGTERM)
        c.jobmanager.wait(20)
        c.start_jobmanager()
        jobs = {j["jid"]: j for j in c.http.get("/jobs/overview").json()["jobs"]}
        assert jobs[jid]["state"] == "FINISHED"
        detail = c.job(jid)
        assert detail["name"] == "batch reduce" and detail["vertices"]
    finally:
        c.stop()
        if url:
            _drop_database(url)


def test_a_taskmanager_reports_its_own_cpu_not_the_hosts(tmp_path: Path) -> None:
    """Two processes burn every core of the host while the TaskManager idles: its CPU figure (REST and
    dashboard) is its own process tree's, near zero, not the host's 100 %."""
    import multiprocessing

    c = Cluster(tmp_path)
    burners = [multiprocessing.get_context("spawn").Process(target=_burn, daemon=True) for _ in range(os.cpu_count() or 1)]
    try:
        c.start(taskmanagers=1, slots=1)
        for b in burners:
            b.start()
        (tm,) = c.http.get("/taskmanagers").json()["taskmanagers"]
        loads: list[float] = []

        def sampled() -> bool:
            loads.append(c.http.get(f"/taskmanagers/{tm['id']}").json()["metrics"]["cpuLoad"])
            return len(loads) >= 4

        c.wait_for(sampled, 60, "heartbeats with CPU figures")
        c.wait_for(lambda: sampled() and len(loads) >= 40, 120, "more heartbeats under the burners' load")
        late = loads[-10:]
        assert max(late) < 0.25, f"an idle TaskManager reported {late} CPU while other processes burned the host"
    finally:
        for b in burners:
            b.kill()
        c.stop()


def _burn() -> None:
    while True:
        pass


def test_a_slow_operators_input_rate_does_not_flap(tmp_path: Path) -> None:
    """2 ms a record is about 500 records/s; counted per 1,024-record buffer the per-second rate
    would read 0 and 1,024 in turns. Counted as processed, every sample is near the true rate."""
    c = Cluster(tmp_path)
    try:
        c.start(taskmanagers=1, slots=1)
        res = c.run(PROGRAMS / "slow_map.py", "20000", options=("--detached",))
        jid = job_id(res.stdout)
        c.wait_state(jid, ("RUNNING",), 60)
        vid = next(v["id"] for v in c.job(jid)["vertices"] if "slow" in v["name"])
        rates: list[float] = []

        def sampled() -> bool:
            r = c.http.get(f"/jobs/{jid}/vertices/{vid}/subtasks/0/metrics", params={"get": "numRecordsInPerSecond"})
            values = [float(m["value"]) for m in r.json() if m.get("value") not in (None, "")]
            if values and values[0] > 0 or rates:
                rates.extend(values[:1])
            time.sleep(1.0)  # the metrics are sampled about once a second
            return len(rates) >= 8

        c.wait_for(sampled, 60, "rate samples")
        steady = rates[2:]  # past the start
        assert min(steady) > 100 and max(steady) < 1000, rates
        c.http.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    finally:
        c.stop()


# A short job with a slot request timeout of its own (Flink's slot.request.timeout in its configuration).
BEHIND = """
from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

config = Configuration()
config.set_string("slot.request.timeout", "120 s")
env = StreamExecutionEnvironment.get_execution_environment(config)
numbers = env.from_source(NumberSequenceSource(1, 300), WatermarkStrategy.no_watermarks(), "numbers")
numbers.map(lambda n: n * 2, output_type=Types.LONG()).print()
env.execute("behind")
"""


def test_the_jobmanager_fails_a_job_that_gets_no_slots_within_the_slot_request_timeout(tmp_path: Path) -> None:
    """Flink's slot.request.timeout enforced by the scheduler, not only by an attached client: the job
    fails with NoResourceAvailableException (REST, dashboard, the CLI's exit 5), holds no slot, and the
    job queued behind it runs."""
    c = Cluster(tmp_path)
    c.env["MILLSTREAM_SLOT_REQUEST_TIMEOUT_S"] = "10"
    try:
        c.start(taskmanagers=1, slots=2)
        hungry = job_id(c.run(PROGRAMS / "unbounded.py", options=("-p", "4", "--detached")).stdout)
        # Its own slot.request.timeout is long: the cluster's 10 s, counted from its own submission a
        # moment later, could also run out under load before the hungry job's failure frees the queue.
        behind_program = tmp_path / "behind.py"
        behind_program.write_text(BEHIND)
        behind = job_id(c.run(behind_program, options=("-p", "2", "--detached")).stdout)
        job = c.wait_state(hungry, ("FAILED", "CANCELED", "FINISHED"), 60)
        assert job["state"] == "FAILED"
        waited = job["timestamps"]["FAILED"] - job["timestamps"]["CREATED"]
        assert 10_000 <= waited < 20_000, waited
        exceptions = c.http.get(f"/jobs/{hungry}/exceptions").json()
        root = exceptions["root-exception"]
        assert root.startswith("NoResourceAvailableException: Could not acquire the minimum required resources"), root
        assert "needs 4 slots" in root and "10000 ms (slot.request.timeout)" in root
        assert exceptions["exceptionHistory"]["entries"][0]["exceptionName"] == "NoResourceAvailableException"
        assert all(v["status"] == "FAILED" for v in job["vertices"])
        graph = c.http.get(f"/ui/jobs/{hungry}/graph").text
        assert "NoResourceAvailableException" in graph and "Could not acquire the minimum required resources" in graph
        # It held nothing, and the job queued behind it (first come, first served) gets the slots.
        done = c.wait_state(behind, ("FINISHED", "FAILED", "CANCELED"), 60)
        assert done["state"] == "FINISHED"
        assert done["timestamps"]["CREATED"] < job["timestamps"]["FAILED"] <= done["timestamps"]["RUNNING"]
        c.wait_for(lambda: c.overview()["slots-available"] == 2, 10, "every slot to be free")

        # An attached client with a longer timeout of its own hears the JobManager's verdict.
        res = c.run(PROGRAMS / "unbounded.py", options=("-p", "4", "--slot-timeout", "120"), timeout=90)
        assert res.returncode == 5, res.stdout + res.stderr
        assert "failed: NoResourceAvailableException: Could not acquire the minimum required resources" in res.stderr
        assert "Traceback" not in res.stderr
    finally:
        c.stop()
