"""What the Dispatcher hands a BATCH job bound for Spark: the cluster's Spark settings (so that
executors on other hosts reach the driver, spark.driver.host), or a clear refusal when PySpark is
not installed. The refusal without a mock is in tests/integration/test_wheel_install.py."""
from __future__ import annotations

from typing import Iterator

import cloudpickle
import pytest
import redis

from millstream.backend.settings import Settings
from millstream.engine.datastream.connectors.number_seq import NumberSequenceSource
from millstream.engine.jobmanager import dispatcher as dispatcher_module
from millstream.engine.jobmanager.dispatcher import Dispatcher, DispatcherConfig, JobSubmissionError
from millstream.engine.jobmanager.job_store import InMemoryJobStore
from millstream.engine.spark.spark_job_master import SparkJobMaster

capture = pytest.importorskip("tests.spark.conftest").capture


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def batch_job():
    job_graph, stream_graph = capture(
        lambda env: env.from_source(NumberSequenceSource(1, 10), None, "n").map(lambda n: n * 2)
    )
    return job_graph, cloudpickle.dumps(stream_graph)


def test_the_driver_host_setting_reaches_the_spark_job(client, tmp_path) -> None:
    settings = Settings(spark_driver_host="jobmanager")
    assert dict(settings.spark_conf) == {"spark.driver.host": "jobmanager", "spark.driver.bindAddress": "0.0.0.0"}
    assert Settings().spark_conf == ()
    d = Dispatcher(client, InMemoryJobStore(), DispatcherConfig(checkpoint_dir=str(tmp_path), spark_conf=settings.spark_conf))
    job_graph, code = batch_job()
    assert job_graph.job_type == "BATCH"
    master = d._job_master_for(job_graph, code)
    assert isinstance(master, SparkJobMaster)
    assert master.spark_conf["spark.driver.host"] == "jobmanager"


def test_without_pyspark_a_spark_job_is_refused_saying_what_to_install(client, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(dispatcher_module, "spark_unavailable_reason", lambda: "Spark is not available: no PySpark")
    d = Dispatcher(client, InMemoryJobStore(), DispatcherConfig(checkpoint_dir=str(tmp_path)))
    job_graph, code = batch_job()
    with pytest.raises(JobSubmissionError, match="no PySpark; or run it with --engine native"):
        d._job_master_for(job_graph, code)
