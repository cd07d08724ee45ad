"""The REST API of a real app against a real Redis and a real SQLite database.

No TaskManager process runs: a job waits in CREATED until a TaskManager is
registered in Redis exactly as ``TaskExecutor`` does it, and then the real
Dispatcher schedules it and deploys its tasks into the slot inboxes.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import cloudpickle
import pytest
import redis
from fastapi.testclient import TestClient

from millstream.backend.api.cluster import masked
from millstream.backend.app import create_app
from millstream.backend.settings import Settings
from millstream.engine import redis_keys
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.jobmanager.job_store import ExceptionRecord, JobRecord
from millstream.engine.taskexecutor import messages

T = TypeVar("T")
TM_ID = "10.1.2.3:4242-abcdef"


def wait_for(probe: Callable[[], T], timeout: float = 10.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s; last value {value!r}")
        time.sleep(0.05)


@pytest.fixture
def settings(redis_url: str, tmp_path: Path) -> Settings:
    return Settings(redis_url=redis_url, data_dir=tmp_path, auth_token="s3cret-token", **FAKE_TM_SETTINGS)


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        client.headers["Authorization"] = f"Bearer {settings.auth_token}"  # mutations need the token
        yield client


@pytest.fixture
def rds(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def submit(api: TestClient, parallelism: int = 2) -> JobGraph:
    env = StreamExecutionEnvironment().set_parallelism(parallelism)
    env.from_collection([1, 2, 3]).map(lambda x: x * 2).print()
    job_graph, stream_graph = env.get_job_graph("rest-job")
    api.app.state.dispatcher.submit(job_graph, cloudpickle.dumps(stream_graph))
    return job_graph


# The fake TaskManager seals its registration like a real one, and beats once: the JobManager counts a
# heartbeat only while its sealed time moves on, so these tests give it a long timeout.
FAKE_TM_SECRET = "fake-taskmanager-secret"
FAKE_TM_SETTINGS = dict(cluster_secret=FAKE_TM_SECRET, heartbeat_interval_ms=200, heartbeat_timeout_ms=600_000)


def register_taskmanager(rds: redis.Redis, slots: int, log_file: Path | None = None) -> None:
    """What TaskExecutor._heartbeat writes: the registry entry, the heartbeat and its metrics."""
    info = {
        "id": TM_ID,
        "host": "10.1.2.3",
        "pid": 4242,
        "slots": slots,
        "started": int(time.time() * 1000),
        "cpu_cores": 8,
        "physical_memory": 16 << 30,
        "log_file": str(log_file) if log_file else None,
    }
    metrics = {"cpu_load": 0.25, "free_memory": 4 << 30, "rss": 300 << 20, "ts": int(time.time() * 1000)}
    pipe = rds.pipeline(transaction=False)
    beat = {"ts": int(time.time() * 1000)}
    pipe.hset(redis_keys.TASKMANAGERS, TM_ID, messages.seal_report(info, FAKE_TM_SECRET, "registration", TM_ID))
    pipe.set(redis_keys.taskmanager_heartbeat(TM_ID), messages.seal_report(beat, FAKE_TM_SECRET, "heartbeat", TM_ID), px=600_000)
    pipe.set(
        redis_keys.taskmanager_metrics(TM_ID), messages.seal_report(metrics, FAKE_TM_SECRET, "tm-metrics", TM_ID), px=600_000
    )
    pipe.execute()


def get(api: TestClient, path: str, status: int = 200) -> Any:
    r = api.get(path)
    assert r.status_code == status, (path, r.status_code, r.text)
    return r.json()


# -- cluster ---------------------------------------------------------------------------
def test_cluster_config_overview_and_empty_taskmanagers(api: TestClient):
    config = get(api, "/config")
    assert config["refresh-interval"] == 3000
    assert config["flink-version"] == "millstream-0.1.0"
    assert config["features"] == {
        "web-submit": True, "web-cancel": True, "web-rescale": False, "web-history": False, "spark": True,
    }  # the test extra installs PySpark; tests/integration/test_wheel_install.py sees "spark": False
    assert isinstance(config["timezone-offset"], int) and config["timezone-name"]
    assert get(api, "/overview") == {
        "taskmanagers": 0,
        "slots-total": 0,
        "slots-available": 0,
        "jobs-running": 0,
        "jobs-finished": 0,
        "jobs-cancelled": 0,
        "jobs-failed": 0,
        "flink-version": "millstream-0.1.0",
        "flink-commit": "unknown",
    }
    assert get(api, "/taskmanagers") == {"taskmanagers": []}
    assert get(api, "/jobs") == {"jobs": []}
    assert get(api, "/v1/jobs/overview") == {"jobs": []}


def test_jobmanager_config_masks_secrets(api: TestClient, settings: Settings):
    entries = {e["key"]: e["value"] for e in get(api, "/jobmanager/config")}
    assert entries["auth_token"] == "******"
    assert entries["redis_url"] == settings.redis_url
    assert entries["port"] == "8081"
    assert "s3cret-token" not in api.get("/jobmanager/config").text
    url = "postgresql+psycopg://ms:hunter2@db:5432/ms"
    assert masked("database_url", url) == "postgresql+psycopg://ms:******@db:5432/ms"


# -- a job waiting for slots --------------------------------------------------------------
def test_waiting_job_is_shown_in_flink_shapes(api: TestClient):
    jg = submit(api)
    jid = jg.job_id
    source, sink = (v.id for v in jg.vertices)

    assert get(api, "/jobs") == {"jobs": [{"id": jid, "status": "CREATED"}]}
    (job,) = get(api, "/jobs/overview")["jobs"]
    assert (job["jid"], job["name"], job["state"], job["end-time"]) == (jid, "rest-job", "CREATED", -1)
    assert job["tasks"]["total"] == 3 and job["tasks"]["created"] == 3

    detail = get(api, f"/jobs/{jid}")
    assert (detail["state"], detail["job-type"], detail["isStoppable"], detail["end-time"]) == (
        "CREATED", "STREAMING", False, -1
    )
    assert detail["status-message"].startswith("waiting for resources: 2 slots needed")
    assert detail["timestamps"]["CREATED"] == job["start-time"] and detail["timestamps"]["RUNNING"] == 0
    assert [v["id"] for v in detail["vertices"]] == [source, sink]
    assert detail["vertices"][1]["tasks"]["CREATED"] == 2
    assert detail["vertices"][1]["metrics"]["read-records-complete"] is False
    assert get(api, f"/v1/jobs/{jid}")["jid"] == jid
    assert get(api, f"/jobs/{jid.upper()}")["jid"] == jid

    plan = get(api, f"/jobs/{jid}/plan")["plan"]
    assert (plan["jid"], plan["name"]) == (jid, "rest-job")
    assert "inputs" not in plan["nodes"][0]
    assert plan["nodes"][1]["inputs"] == [
        {"num": 0, "id": source, "ship_strategy": "REBALANCE", "exchange": "pipelined_bounded"}
    ]

    vertex = get(api, f"/jobs/{jid}/vertices/{sink}")
    assert (vertex["id"], vertex["parallelism"], len(vertex["subtasks"])) == (sink, 2, 2)
    assert vertex["subtasks"][1]["endpoint"] == "(unassigned)" and vertex["subtasks"][1]["status"] == "CREATED"
    assert get(api, f"/jobs/{jid}/vertices/{sink}/backpressure") == {"status": "deprecated"}
    assert get(api, f"/jobs/{jid}/vertices/{sink}/watermarks") == []
    assert get(api, f"/jobs/{jid}/vertices/{sink}/subtasks/metrics?get=read-records") == []
    times = get(api, f"/jobs/{jid}/vertices/{sink}/subtasktimes")
    assert times["subtasks"][0]["timestamps"]["CREATED"] == job["start-time"]
    (group,) = get(api, f"/jobs/{jid}/vertices/{sink}/taskmanagers")["taskmanagers"]
    assert (group["taskmanager-id"], group["status-counts"]["CREATED"]) == ("(unassigned)", 2)

    assert get(api, f"/jobs/{jid}/exceptions")["exceptionHistory"] == {"entries": [], "truncated": False}
    assert get(api, f"/jobs/{jid}/config")["execution-config"]["job-parallelism"] == 2
    assert get(api, f"/jobs/{jid}/accumulators") == {
        "job-accumulators": [], "user-task-accumulators": [], "serialized-user-task-accumulators": {}
    }
    assert get(api, f"/jobs/{jid}/execution-result") == {"status": {"id": "IN_PROGRESS"}}
    assert get(api, "/overview")["jobs-running"] == 1


def test_errors_are_flink_shaped(api: TestClient):
    jid = submit(api).job_id
    unknown = "0123456789abcdef0123456789abcdef"
    assert get(api, f"/jobs/{unknown}", 404) == {"errors": [f"Job {unknown} not found"]}
    assert get(api, "/jobs/not-a-job-id", 404)["errors"]
    assert get(api, f"/jobs/{unknown}/plan", 404)["errors"]
    assert get(api, f"/jobs/{jid}/vertices/{'f' * 32}", 404)["errors"] == [f"Vertex {'f' * 32} not found in this job"]
    assert get(api, f"/jobs/{jid}/vertices/{'f' * 32}/backpressure", 404)["errors"]
    vid = get(api, f"/jobs/{jid}/plan")["plan"]["nodes"][0]["id"]
    assert get(api, f"/jobs/{jid}/vertices/{vid}/subtasks/metrics?get=a&agg=median", 400)["errors"]
    assert get(api, f"/jobs/{jid}/exceptions?maxExceptions=-1", 400)["errors"]

    r = api.patch(f"/jobs/{jid}", params={"mode": "stop"})
    assert r.status_code == 400 and "cancel" in r.json()["errors"][0]
    r = api.patch(f"/jobs/{unknown}", params={"mode": "cancel"})
    assert r.status_code == 404 and r.json() == {"errors": [f"Job {unknown} not found"]}
    assert get(api, "/taskmanagers/nope", 404) == {"errors": ["TaskManager nope not found"]}
    assert get(api, "/taskmanagers/nope/log", 404)["errors"]


def test_cancel_answers_202_and_the_job_ends_canceled(api: TestClient):
    jid = submit(api).job_id
    r = api.patch(f"/jobs/{jid}", params={"mode": "cancel"})
    assert (r.status_code, r.json()) == (202, {})
    detail = wait_for(lambda: (d := get(api, f"/jobs/{jid}"))["state"] == "CANCELED" and d)
    assert detail["end-time"] >= detail["start-time"] > 0
    assert detail["duration"] == detail["end-time"] - detail["start-time"]
    assert detail["timestamps"]["CANCELED"] == detail["end-time"]
    assert detail["status-counts"]["CANCELED"] == 3
    assert get(api, f"/v1/jobs/{jid}/execution-result")["job-execution-result"]["application-status"] == "CANCELED"
    assert get(api, "/overview")["jobs-cancelled"] == 1
    # cancelling an ended job is accepted and changes nothing
    assert api.patch(f"/v1/jobs/{jid}").status_code == 202


def test_a_finished_job_from_an_earlier_run_is_read_from_sql(api: TestClient):
    jg = submit(api, parallelism=1)  # only to build a real graph: store a finished copy under a new id
    jid = "ab" * 16
    graph = {**jg.to_dict(), "job_id": jid}
    vertices = [
        {
            "id": v.id, "name": v.name, "parallelism": 1, "maxParallelism": v.max_parallelism, "status": "FAILED",
            "tasks": {"FAILED": 1},
            "subtasks": [{
                "subtask": 0, "status": "FAILED", "attempt": 0, "taskmanager_id": TM_ID, "slot": 0,
                "timestamps": {"CREATED": 1000, "DEPLOYING": 1100, "RUNNING": 1200, "FAILED": 2000},
                "failure": "boom", "metrics": {"read-records": 7, "backPressuredTimeMsPerSecond": 600, "ts": 1900},
            }],
        }
        for v in jg.vertices
    ]
    store = api.app.state.dispatcher.store
    store.save_job(JobRecord(jid, "old", "FAILED", "STREAMING", 1000, 2000, 2000, graph,
                             {"CREATED": 1000, "RUNNING": 1100, "FAILING": 1950, "FAILED": 2000}, vertices, "boom"))
    store.add_exception(ExceptionRecord(jid, 1950, "ValueError", "Traceback\nValueError: boom", "Map (1/1)",
                                        jg.vertices[0].id, 0, 0, "10.1.2.3", TM_ID))

    detail = get(api, f"/jobs/{jid}")
    assert (detail["state"], detail["end-time"], detail["duration"]) == ("FAILED", 2000, 1000)
    assert detail["vertices"][0]["metrics"]["read-records"] == 7
    assert detail["vertices"][0]["metrics"]["read-records-complete"] is True
    bp = get(api, f"/jobs/{jid}/vertices/{jg.vertices[0].id}/backpressure")
    assert (bp["status"], bp["backpressure-level"], bp["end-timestamp"]) == ("ok", "high", 1900)
    exceptions = get(api, f"/jobs/{jid}/exceptions?maxExceptions=5")
    assert exceptions["root-exception"] == "Traceback\nValueError: boom"
    assert exceptions["exceptionHistory"]["entries"][0]["exceptionName"] == "ValueError"
    result = get(api, f"/jobs/{jid}/execution-result")["job-execution-result"]
    assert result["failure"]["class"] == "ValueError" and result["net-runtime"] == 1000
    assert {j["jid"] for j in get(api, "/jobs/overview")["jobs"]} == {jid, jg.job_id}


# -- TaskManagers and scheduling -----------------------------------------------------------
def test_registered_taskmanager_is_listed_and_the_waiting_job_is_deployed(
    api: TestClient, rds: redis.Redis, settings: Settings
):
    jg = submit(api)
    jid, sink = jg.job_id, jg.vertices[1].id
    log_file = settings.log_dir / "taskmanager-0.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_text("".join(f"line {i}\n" for i in range(100)))
    register_taskmanager(rds, slots=3, log_file=log_file)

    (tm,) = wait_for(lambda: get(api, "/taskmanagers")["taskmanagers"])
    assert set(tm) == {"id", "path", "dataPort", "timeSinceLastHeartbeat", "slotsNumber", "freeSlots", "hardware"}
    assert (tm["id"], tm["slotsNumber"]) == (TM_ID, 3)
    assert tm["hardware"] == {"cpuCores": 8, "physicalMemory": 16 << 30, "freeMemory": 4 << 30, "managedMemory": 0}

    # the Dispatcher schedules the waiting job on the new slots: 2 slots for parallelism 2
    detail = wait_for(lambda: (d := get(api, f"/jobs/{jid}"))["state"] == "RUNNING" and d)
    assert "status-message" not in detail
    assert detail["status-counts"]["DEPLOYING"] == 3 and detail["timestamps"]["RUNNING"] > 0
    (job,) = get(api, "/jobs/overview")["jobs"]
    assert (job["state"], job["tasks"]["deploying"], job["tasks"]["total"]) == ("RUNNING", 3, 3)
    inboxes = [rds.lrange(redis_keys.slot_inbox(TM_ID, slot), 0, -1) for slot in range(3)]
    secret = api.app.state.dispatcher.config.cluster_secret  # control messages are sealed per inbox
    deployed = [
        [messages.open_message(raw, secret, redis_keys.slot_inbox(TM_ID, slot))["type"] for raw in inbox]
        for slot, inbox in enumerate(inboxes)
    ]
    assert sorted(deployed) == [[], ["deploy"], ["deploy", "deploy"]]  # source + sink share one slot

    subtask = get(api, f"/jobs/{jid}/vertices/{sink}")["subtasks"][1]
    assert (subtask["status"], subtask["taskmanager-id"], subtask["endpoint"]) == ("DEPLOYING", TM_ID, "10.1.2.3")
    assert subtask["start-time"] > 0 and subtask["end-time"] == -1

    one = get(api, f"/taskmanagers/{TM_ID}")
    assert one["freeSlots"] == 1
    assert [s["jobId"] for s in one["allocatedSlots"]] == [jid, jid]
    assert one["metrics"]["cpuLoad"] == 0.25
    overview = get(api, "/overview")
    assert (overview["taskmanagers"], overview["slots-total"], overview["slots-available"]) == (1, 3, 1)

    (log,) = get(api, f"/taskmanagers/{TM_ID}/logs")["logs"]
    assert (log["name"], log["size"]) == ("taskmanager-0.log", log_file.stat().st_size)
    r = api.get(f"/v1/taskmanagers/{TM_ID}/log")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert r.text.endswith("line 99\n")
    assert api.get(f"/taskmanagers/{TM_ID}/stdout").text == r.text


def test_a_log_file_outside_the_log_directory_is_never_served(api: TestClient, rds: redis.Redis, tmp_path: Path):
    outside = tmp_path / "secret.txt"
    outside.write_text("do not serve")
    register_taskmanager(rds, slots=1, log_file=outside)
    wait_for(lambda: get(api, "/taskmanagers")["taskmanagers"])
    assert get(api, f"/taskmanagers/{TM_ID}/logs") == {"logs": []}
    r = api.get(f"/taskmanagers/{TM_ID}/log")
    assert r.status_code == 404 and "do not serve" not in r.text
