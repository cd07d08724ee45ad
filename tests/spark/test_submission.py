"""A bounded job Spark cannot run is refused at submission, through REST and ``millstream run``, naming the operator.

A real JobManager (no TaskManagers: Spark jobs take no slots) and its own
valkey; nothing is translated or started for a refused job.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.cluster import Cluster

pytest.importorskip("pyspark")

WINDOWED = """
from pyflink.common import Time, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.window import {imports}


class Stamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Stamp())
windowed = (
    env.from_collection([("a", 1), ("b", 2), ("a", 1500)])
    .assign_timestamps_and_watermarks(strategy)
    .key_by(lambda e: e[0])
    .window(TumblingEventTimeWindows.of(Time.seconds(1)))
    {customise}
    .reduce(lambda a, b: (a[0], a[1] + b[1]))
)
print(sorted(windowed.execute_and_collect("windows in batch")))
"""


def program(tmp_path: Path, name: str, imports: str, customise: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(WINDOWED.format(imports=imports, customise=customise))
    return path


def job_ids(cluster: Cluster) -> set[str]:
    return {j["jid"] for j in cluster.http.get("/jobs/overview").json()["jobs"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("spark-submission"))
    try:
        yield c.start(taskmanagers=0)
    finally:
        c.stop()


def test_millstream_run_refuses_an_untranslatable_trigger_with_a_400(cluster: Cluster, tmp_path: Path) -> None:
    path = program(
        tmp_path,
        "continuous",
        "ContinuousEventTimeTrigger, TumblingEventTimeWindows",
        ".trigger(ContinuousEventTimeTrigger.of(Time.milliseconds(100)))",
    )
    jobs_before = job_ids(cluster)
    res = cluster.run(path, timeout=120)
    assert res.returncode != 0
    assert "400" in res.stderr, res.stderr
    assert "operator 'Window(TumblingEventTimeWindows, ReduceFunction)' cannot run on Spark" in res.stderr
    assert "the trigger ContinuousEventTimeTrigger is not translated" in res.stderr
    assert "--engine native" in res.stderr  # the way out is named too
    assert job_ids(cluster) == jobs_before  # nothing was started


def test_rest_upload_and_run_refuses_an_untranslatable_evictor_with_a_400(cluster: Cluster, tmp_path: Path) -> None:
    path = program(
        tmp_path,
        "evicting",
        "TimeEvictor, TumblingEventTimeWindows",
        ".evictor(TimeEvictor.of(Time.milliseconds(10)))",
    )
    with open(path, "rb") as f:
        up = cluster.http.post("/jars/upload", files={"jarfile": ("evicting.py", f, "text/x-python")})
    assert up.status_code == 200, up.text
    jar_id = up.json()["filename"]
    jobs_before = job_ids(cluster)
    run = cluster.http.post(f"/jars/{jar_id}/run", json={"parallelism": 2})
    assert run.status_code == 400, run.text
    (error,) = run.json()["errors"]
    assert "operator 'Window(TumblingEventTimeWindows, ReduceFunction)' cannot run on Spark" in error
    assert "the evictor TimeEvictor is not translated" in error
    assert job_ids(cluster) == jobs_before


def test_a_translatable_window_is_accepted_and_runs_on_spark(cluster: Cluster, tmp_path: Path) -> None:
    """The same program without the custom trigger passes the same check: the refusal is about the trigger."""
    path = program(tmp_path, "plain", "TumblingEventTimeWindows", "")
    res = cluster.run(path, timeout=240)
    assert res.returncode == 0, res.stderr
    assert "[('a', 1), ('a', 1500), ('b', 2)]" in res.stdout


LONG = """
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
# Bounded, but 10 M records at 50 per second and subtask: it runs until cancelled.
env.from_source(DataGeneratorSource(lambda i: i, 10_000_000, records_per_second=50), None, "slow").map(str).print()
env.execute("long batch")
"""


def test_cancel_of_a_long_spark_job_over_rest(cluster: Cluster, tmp_path: Path) -> None:
    path = tmp_path / "long.py"
    path.write_text(LONG)
    with open(path, "rb") as f:
        jar_id = cluster.http.post("/jars/upload", files={"jarfile": ("long.py", f)}).json()["filename"]
    run = cluster.http.post(f"/jars/{jar_id}/run", json={"parallelism": 2})
    assert run.status_code == 200, run.text
    jid = run.json()["jobid"]
    # Spark really runs it: its tasks are active in the status tracker.
    cluster.wait_for(
        lambda: any(s["numActiveTasks"] > 0 for s in cluster.job(jid)["spark"]["stages"]), 120, "Spark tasks to run"
    )
    assert cluster.job(jid)["state"] == "RUNNING"
    assert cluster.http.patch(f"/jobs/{jid}", params={"mode": "cancel"}).status_code == 202
    job = cluster.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"), 60)
    assert job["state"] == "CANCELED"
    assert job["job-type"] == "BATCH"
    # The cancelled job group left no Spark task running.
    assert all(s["numActiveTasks"] == 0 for s in job["spark"]["stages"])
    assert cluster.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"] == []


def test_a_spark_job_fails_clearly_when_redis_comes_back_empty(tmp_path: Path) -> None:
    """A BATCH job on Spark keeps its unread results, progress and print lines in Redis and has no
    checkpoint: when Redis comes back as a new server the job fails with the reason (its driver
    stopped), rather than its client taking what is left for the whole result."""
    import os
    import signal

    from millstream.backend.embedded_redis import embedded_redis_alive, restart_embedded_redis

    c = Cluster(tmp_path)
    try:
        c.start(taskmanagers=0)
        path = tmp_path / "long.py"
        path.write_text(LONG)
        with open(path, "rb") as f:
            jar_id = c.http.post("/jars/upload", files={"jarfile": ("long.py", f)}).json()["filename"]
        jid = c.http.post(f"/jars/{jar_id}/run", json={"parallelism": 2}).json()["jobid"]
        c.wait_for(lambda: any(s["numActiveTasks"] > 0 for s in c.job(jid)["spark"]["stages"]), 120, "Spark tasks to run")
        pid = c.redis.pid
        os.kill(pid, signal.SIGKILL)
        c.wait_for(lambda: not embedded_redis_alive(c.redis), 10, f"Redis ({pid}) to die")
        restart_embedded_redis(c.redis)
        job = c.wait_state(jid, ("CANCELED", "FAILED", "FINISHED"), 60)
        assert job["state"] == "FAILED"
        entries = c.http.get(f"/jobs/{jid}/exceptions").json()["exceptionHistory"]["entries"]
        assert entries and entries[0]["exceptionName"] == "RedisConnectionLost", entries
        assert "submit it again" in entries[0]["stacktrace"]
    finally:
        c.stop()
