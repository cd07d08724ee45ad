"""A job on a real Spark standalone master and worker (from the PySpark package), on loopback.

The worker's Python is a bare virtualenv with nothing installed (Spark puts its own pyspark.zip on the
path): Millstream is not installed there, so the engine reaches the executors by ``addPyFile``, as on
a standalone Spark cluster on other hosts."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from millstream.backend.free_ports import free_port
from millstream.engine.executiongraph.states import JobStatus
from millstream.engine.resourcemanager.slot_pool import SlotPool
from tests.spark.test_spark_job_master import collected, make_master, run_until_terminal

pyspark = pytest.importorskip("pyspark")




def _wait_for_worker(work: Path, timeout_s: float = 90) -> None:
    """Until the worker says the master registered it.

    Read from the worker's log, not the master's web UI: a CI run once got the UI's HTML page for
    ``/json/`` (status 200), and the UI answers on another port than asked when its own is taken."""
    deadline = time.monotonic() + timeout_s
    log = work / "worker.log"
    while time.monotonic() < deadline:
        if log.exists() and "Successfully registered with master" in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    tails = {name: (work / name).read_text(errors="replace")[-3000:] for name in ("master.log", "worker.log")}
    raise TimeoutError(f"the Spark worker did not register with the master: {tails}")


@pytest.fixture(scope="module")
def spark_master_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    work = tmp_path_factory.mktemp("spark-standalone")
    bare = work / "bare-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")}
    # Executors start "python3" from the worker's PATH: the bare one.
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(work), SPARK_NO_DAEMONIZE="1",
               PATH=f"{bare / 'bin'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}")
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    try:
        procs.append(subprocess.Popen(
            [str(spark_class), "org.apache.spark.deploy.master.Master",
             "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)],
            env=env, stdout=open(work / "master.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,
        ))
        procs.append(subprocess.Popen(
            [str(spark_class), "org.apache.spark.deploy.worker.Worker", url,
             "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
             "--webui-port", str(worker_ui), "--work-dir", str(work / "worker")],
            env=env, stdout=open(work / "worker.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,
        ))
        _wait_for_worker(work)
        yield url, str(bare)
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def word_count(env):
    lines = ["a rose is a rose", "is a rose", "a"] * 50
    return (
        env.from_collection(lines)
        .flat_map(lambda line: [(w, 1) for w in line.split()])
        .rebalance()
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )


def where_it_ran(env):
    return env.from_collection(["a", "b"]).map(lambda w: (w, sys.prefix, "millstream.engine" in sys.modules))


def _run(program, master: str, redis_url: str):
    """The job on the standalone cluster, to its end: (job master, Redis client); it must finish."""
    conf = {"spark.executor.memory": "512m", "spark.driver.host": "127.0.0.1", "spark.cores.max": "1"}
    jm, store, client = make_master(program, redis_url, spark_master=master, conf=conf)
    pool = SlotPool()
    jm.try_schedule(pool)
    run_until_terminal(jm, pool, 180)
    assert jm.status is JobStatus.FINISHED, [e.stacktrace[-2000:] for e in store.list_exceptions(jm.job_id)]
    return jm, client


def test_job_runs_on_a_standalone_cluster(spark_master_url, redis_url):
    spark_master_url, _ = spark_master_url
    jm, client = _run(word_count, spark_master_url, redis_url)
    assert sorted(collected(client, jm.job_id)) == [("a", 200), ("is", 100), ("rose", 150)]
    progress = jm.spark_progress()
    assert progress["master"] == spark_master_url
    assert progress["applicationId"].startswith("app-")  # a standalone application, not local-*


def test_executors_need_only_pyspark_and_python(spark_master_url, redis_url, monkeypatch):
    """The executors ran the job's function in the bare interpreter, with the shipped engine loaded."""
    # The in-process Spark fixture (tests/spark/conftest.py) sets PYSPARK_PYTHON for the whole
    # session; a JobManager that has none leaves the executors to the workers' own Python.
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    spark_master_url, bare = spark_master_url
    jm, client = _run(where_it_ran, spark_master_url, redis_url)
    assert sorted(collected(client, jm.job_id)) == [("a", bare, True), ("b", bare, True)]
