"""SparkJobMaster on a real valkey and real Spark driver processes (local[2])."""
from __future__ import annotations

import time
from pathlib import Path

import cloudpickle
import pytest
import redis

from millstream.engine import redis_keys
from millstream.engine.datastream.connectors.datagen import DataGeneratorSource
from millstream.engine.datastream.connectors.number_seq import NumberSequenceSource
from millstream.engine.executiongraph.states import JobStatus
from millstream.engine.jobmanager.job_store import InMemoryJobStore
from millstream.engine.resourcemanager.slot_pool import SlotPool
from millstream.engine.runtime.collect import RECORDS, CollectEntry
from millstream.engine.runtime.io.serialization import MsgpackSerializer
from millstream.engine.spark.spark_job_master import SparkJobMaster
from millstream.engine.spark.validation import UntranslatableJob
from millstream.engine.security.mac import Sealer
from millstream.engine.taskexecutor.gateway import RedisTaskExecutorGateway
from tests.spark.conftest import capture

SPARK_CONF = {"spark.ui.enabled": "false", "spark.driver.memory": "512m"}
SECRET = "spark-test-secret"  # the driver seals its collect entries with it


def make_master(program, redis_url: str, spark_master: str = "local[2]", conf: dict | None = None):
    job_graph, stream_graph = capture(program)
    store = InMemoryJobStore()
    client = redis.Redis.from_url(redis_url)
    jm = SparkJobMaster(
        job_graph,
        cloudpickle.dumps(stream_graph),
        RedisTaskExecutorGateway(client, SECRET),
        store,
        spark_master=spark_master,
        redis_url=redis_url,
        spark_conf={**SPARK_CONF, **(conf or {})},
    )
    return jm, store, client


def run_until_terminal(jm: SparkJobMaster, pool: SlotPool, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not jm.status.is_terminal():
        assert time.monotonic() < deadline, f"job still {jm.status.value}"
        jm.tick(pool)
        time.sleep(0.2)


def collected(client: redis.Redis, job_id: str) -> list:
    ser = MsgpackSerializer()
    sealer = Sealer(SECRET, "collect", redis_keys.collect(job_id))
    # Each entry is ``writer id | index | envelope``, the MAC covering both (engine/runtime/io/redis_collect.py).
    entries = [
        CollectEntry.decode(sealer.open(raw[16:], int.from_bytes(raw[8:16], "big"), raw[:16]), ser)
        for raw in client.lrange(redis_keys.collect(job_id), 0, -1)
    ]
    return [v for e in entries if e.kind == RECORDS for v in e.values]


@pytest.fixture
def driver_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temp dir of the drivers started in the test (TMPDIR passes to them), to see what they leave."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    return tmp_path


def assert_no_pyfiles_dir_left(tmp: Path) -> None:
    # Each driver makes millstream-pyfiles-<job>-* for the job's shipped files and must delete it.
    assert not list(tmp.glob("millstream-pyfiles-*")), sorted(p.name for p in tmp.iterdir())


def counts(env):
    return (
        env.from_source(NumberSequenceSource(1, 3000), None, "numbers")
        .map(lambda n: ("w%d" % (n % 10), 1))
        .key_by(lambda t: t[0])
        .sum(1)
    )


def test_finished_job_delivers_results_and_progress(redis_url, driver_tmp):
    jm, store, client = make_master(counts, redis_url)
    pool = SlotPool()
    assert jm.try_schedule(pool)
    assert jm.status is JobStatus.RUNNING
    assert all(s["status"] == "RUNNING" for v in jm.record().vertices for s in v["subtasks"])
    run_until_terminal(jm, pool)
    assert jm.status is JobStatus.FINISHED, store.list_exceptions(jm.job_id)
    assert sorted(collected(client, jm.job_id)) == [("w%d" % i, 300) for i in range(10)]
    rec = store.get_job(jm.job_id)
    assert rec.state == "FINISHED" and rec.job_type == "BATCH" and rec.end_time > 0
    assert all(s["status"] == "FINISHED" for v in rec.vertices for s in v["subtasks"])
    progress = jm.spark_progress()
    assert progress["applicationId"].startswith("local-")
    stages = progress["stages"]
    # a stage Spark skipped (its shuffle output was reused) shows no completed tasks
    assert stages and all(s["numFailedTasks"] == 0 and s["numActiveTasks"] == 0 for s in stages)
    assert any(s["numCompletedTasks"] == s["numTasks"] > 0 and "reduceByKey" in s["name"] for s in stages)
    assert {"stageId", "name", "numTasks", "numActiveTasks", "numFailedTasks"} <= set(stages[0])
    assert_no_pyfiles_dir_left(driver_tmp)


class Boom(Exception):
    pass


def failing(env):
    def explode(n):
        if n == 77:
            raise Boom("no 77 allowed")
        return n

    return env.from_source(NumberSequenceSource(1, 100), None, "numbers").map(explode)


def test_failed_job_records_the_user_exception(redis_url, driver_tmp):
    jm, store, _ = make_master(failing, redis_url)
    pool = SlotPool()
    jm.try_schedule(pool)
    run_until_terminal(jm, pool)
    assert jm.status is JobStatus.FAILED
    assert "no 77 allowed" in jm.eg.failure_cause
    (exc,) = store.list_exceptions(jm.job_id)
    assert exc.exception_name == "Boom"
    assert "explode" in exc.stacktrace and "Traceback" in exc.stacktrace
    assert store.get_job(jm.job_id).state == "FAILED"
    assert_no_pyfiles_dir_left(driver_tmp)


def test_cancel_stops_the_driver(redis_url, driver_tmp):
    def slow(env):
        return env.from_source(DataGeneratorSource(lambda i: i, 10_000_000, records_per_second=100), None, "slow")

    jm, store, _ = make_master(slow, redis_url)
    pool = SlotPool()
    jm.try_schedule(pool)
    deadline = time.monotonic() + 60
    while not jm.spark_progress()["stages"] and time.monotonic() < deadline:
        time.sleep(0.2)  # wait until Spark really runs the job
    assert jm.cancel(pool)
    assert jm.status is JobStatus.CANCELLING
    run_until_terminal(jm, pool, 60)
    assert jm.status is JobStatus.CANCELED
    assert jm.process.returncode == 3  # the driver cancelled its job group and exited cleanly
    assert store.get_job(jm.job_id).state == "CANCELED"
    assert not jm.cancel(pool)
    assert_no_pyfiles_dir_left(driver_tmp)


def test_unbounded_job_is_refused_at_construction(redis_url):
    def endless(env):
        return env.from_source(DataGeneratorSource(lambda i: i, count=None), None, "endless")

    with pytest.raises(UntranslatableJob, match="Source: endless"):
        make_master(endless, redis_url)


def test_user_code_is_stored_once_not_on_every_state_change(redis_url):
    jm, store, _ = make_master(counts, redis_url)
    assert jm.record().user_code == jm.user_code  # the first record carries it
    jm.persist()
    assert jm.record().user_code is None  # later records leave it out ...
    jm.persist()
    assert store.get_job(jm.job_id).user_code == jm.user_code  # ... and the store keeps what it has
