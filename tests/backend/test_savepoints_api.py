"""Savepoint, stop and manual checkpoint REST endpoints of a real app, real Redis and real SQLite.

No TaskManager process runs: the test registers one in Redis as ``TaskExecutor``
does, reads what the Dispatcher puts into the slot inboxes (deployments,
checkpoint triggers) and answers through the JobManager inbox as tasks would.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
import redis
from fastapi.testclient import TestClient

from millstream.backend.app import create_app
from millstream.backend.settings import Settings
from millstream.engine import redis_keys
from millstream.engine.checkpoint.messages import TaskAck
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.taskexecutor import messages
from tests.backend.test_rest_api import FAKE_TM_SETTINGS, TM_ID, register_taskmanager, wait_for


@pytest.fixture
def settings(redis_url: str, tmp_path: Path) -> Settings:
    return Settings(redis_url=redis_url, data_dir=tmp_path / "var", auth_token="tok", **FAKE_TM_SETTINGS)


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        client.headers["Authorization"] = "Bearer tok"
        yield client


@pytest.fixture
def rds(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


class FakeTasks:
    """The tasks of one job as the JobManager sees them through Redis."""

    def __init__(self, rds: redis.Redis, slots: int) -> None:
        self.rds = rds
        self.slots = slots
        self.tdds: list[dict[str, Any]] = []
        self.secret: str | None = None  # the JobManager's cluster secret: control messages are sealed with it
        self.epoch: int | None = None  # the JobManager's epoch, which its inbox demands

    def inbox(self, kind: str) -> list[dict[str, Any]]:
        out = []
        for slot in range(self.slots):
            key = redis_keys.slot_inbox(TM_ID, slot)
            for raw in self.rds.lrange(key, 0, -1):
                msg = messages.open_message(raw, self.secret, key)
                if msg["type"] == kind:
                    out.append(msg)
        return out

    def deployed(self, expected: int) -> None:
        self.tdds = wait_for(lambda: len(self.inbox("deploy")) == expected and [m["tdd"] for m in self.inbox("deploy")])

    def report(self, state: str) -> None:
        for t in self.tdds:
            msg = messages.task_state(
                t["job_id"], t["vertex_id"], t["subtask"], t["attempt"], state, TM_ID, 0, int(time.time() * 1000)
            )
            self.rds.rpush(redis_keys.JOBMANAGER_INBOX, messages.seal(msg, self.secret, redis_keys.JOBMANAGER_INBOX, self.epoch))

    def ack(self, checkpoint_id: int) -> None:
        for t in self.tdds:
            msg = messages.checkpoint_ack(
                t["job_id"], t["attempt"], t["vertex_id"], t["subtask"], checkpoint_id,
                TaskAck({}, 5, ack_timestamp=int(time.time() * 1000)).to_dict(),
            )
            self.rds.rpush(redis_keys.JOBMANAGER_INBOX, messages.seal(msg, self.secret, redis_keys.JOBMANAGER_INBOX, self.epoch))


def running_job(api: TestClient, rds: redis.Redis) -> tuple[str, FakeTasks]:
    env = StreamExecutionEnvironment().set_parallelism(2)
    env.from_collection([1, 2, 3]).map(lambda x: x * 2).uid("doubler").print()
    job_graph, stream_graph = env.get_job_graph("savepoint-job")
    jid = api.app.state.dispatcher.submit(job_graph, cloudpickle.dumps(stream_graph))
    tasks = FakeTasks(rds, 2)
    tasks.secret = api.app.state.dispatcher.config.cluster_secret
    tasks.epoch = api.app.state.dispatcher.epoch  # the JobManager's inbox takes only reports sealed for it
    register_taskmanager(rds, 2)
    tasks.deployed(sum(v.parallelism for v in job_graph.vertices))
    tasks.report("INITIALIZING")
    tasks.report("RUNNING")
    wait_for(lambda: api.get(f"/jobs/{jid}").json()["status-counts"]["RUNNING"] == len(tasks.tdds))
    return jid, tasks


def status(api: TestClient, jid: str, request_id: str) -> dict[str, Any]:
    r = api.get(f"/jobs/{jid}/savepoints/{request_id}")
    assert r.status_code == 200, r.text
    return r.json()


def test_a_savepoint_over_rest_is_taken_once_per_trigger_id_and_reported(api: TestClient, rds: redis.Redis, tmp_path: Path) -> None:
    jid, tasks = running_job(api, rds)
    body = {"target-directory": str(tmp_path / "sp"), "triggerId": "retry-me"}
    r = api.post(f"/jobs/{jid}/savepoints", json=body)
    assert (r.status_code, r.json()) == (202, {"request-id": "retry-me"})
    assert api.post(f"/v1/jobs/{jid}/savepoints", json=body).json() == {"request-id": "retry-me"}
    triggers = tasks.inbox("trigger_checkpoint")
    sources = [t for t in tasks.tdds if not t["inputs"]]
    assert len(triggers) == len(sources)  # the retry sent nothing
    cid, _, location, kind, drain = triggers[0]["barrier"]
    assert (kind, drain) == ("SAVEPOINT", False) and location.startswith(str(tmp_path / "sp"))
    assert status(api, jid, "retry-me") == {"status": {"id": "IN_PROGRESS"}, "operation": None}

    tasks.ack(cid)
    done = wait_for(lambda: status(api, jid, "retry-me")["status"]["id"] == "COMPLETED" and status(api, jid, "retry-me"))
    assert done["operation"] == {"location": location}
    assert (Path(location) / "_metadata").is_file()
    (entry,) = api.get(f"/jobs/{jid}/savepoints").json()["savepoints"]
    assert (entry["request-id"], entry["status"], entry["location"], entry["stop"]) == ("retry-me", "COMPLETED", location, False)
    latest = api.get(f"/jobs/{jid}/checkpoints").json()["latest"]["savepoint"]
    assert latest["external_path"] == location and latest["is_savepoint"]
    assert api.get(f"/jobs/{jid}").json()["state"] == "RUNNING"


def test_stop_with_savepoint_over_rest_ends_the_job_finished(api: TestClient, rds: redis.Redis, tmp_path: Path) -> None:
    jid, tasks = running_job(api, rds)
    r = api.post(f"/jobs/{jid}/stop", json={"targetDirectory": str(tmp_path / "sp"), "drain": True})
    assert r.status_code == 202
    request_id = r.json()["request-id"]
    cid, _, location, kind, drain = tasks.inbox("trigger_checkpoint")[0]["barrier"]
    assert (kind, drain) == ("SYNC_SAVEPOINT", True)
    tasks.ack(cid)
    wait_for(lambda: status(api, jid, request_id)["status"]["id"] == "COMPLETED")
    wait_for(lambda: tasks.inbox("notify_checkpoint_complete"))
    tasks.report("FINISHED")  # the sources end once the savepoint completed
    wait_for(lambda: api.get(f"/jobs/{jid}").json()["state"] == "FINISHED")
    (entry,) = api.get(f"/jobs/{jid}/savepoints").json()["savepoints"]
    assert entry["stop"] and entry["drain"] and entry["location"] == location


def test_a_failed_savepoint_reports_its_cause_and_the_job_keeps_running(api: TestClient, rds: redis.Redis, tmp_path: Path) -> None:
    jid, tasks = running_job(api, rds)
    request_id = api.post(f"/jobs/{jid}/stop", json={"targetDirectory": str(tmp_path / "sp")}).json()["request-id"]
    cid = tasks.inbox("trigger_checkpoint")[0]["barrier"][0]
    t = tasks.tdds[-1]
    decline = messages.checkpoint_decline(t["job_id"], t["attempt"], t["vertex_id"], t["subtask"], cid, "no space left on device")
    rds.rpush(redis_keys.JOBMANAGER_INBOX, messages.seal(decline, tasks.secret, redis_keys.JOBMANAGER_INBOX, tasks.epoch))
    failed = wait_for(lambda: (s := status(api, jid, request_id))["operation"] and s)
    assert failed["status"]["id"] == "COMPLETED"
    assert "no space left on device" in failed["operation"]["failure-cause"]["stack-trace"]
    assert wait_for(lambda: tasks.inbox("notify_checkpoint_aborted"))[0]["checkpoint_id"] == cid
    assert api.get(f"/jobs/{jid}").json()["state"] == "RUNNING"


def test_bad_savepoint_requests_are_refused_with_a_reason(api: TestClient, rds: redis.Redis, tmp_path: Path) -> None:
    unknown = "0" * 32
    assert api.post(f"/jobs/{unknown}/savepoints", json={}).status_code == 404
    env = StreamExecutionEnvironment()
    env.from_collection([1]).print()
    job_graph, stream_graph = env.get_job_graph("waiting")
    jid = api.app.state.dispatcher.submit(job_graph, cloudpickle.dumps(stream_graph))  # no slots: CREATED
    r = api.post(f"/jobs/{jid}/savepoints", json={"target-directory": str(tmp_path / "sp")})
    assert r.status_code == 409 and "it is CREATED" in r.json()["errors"][0]
    r = api.post(f"/jobs/{jid}/savepoints", json={"triggerId": "no spaces allowed"})
    assert r.status_code == 400 and "triggerId" in r.json()["errors"][0]
    r = api.post(f"/jobs/{jid}/savepoints", json={"target_dir": "/tmp"})
    assert r.status_code == 400 and "target_dir" in r.json()["errors"][0]
    assert api.get(f"/jobs/{jid}/savepoints/nothing").status_code == 404
    r = api.post(f"/jobs/{jid}/checkpoints", json={"checkpointType": "DELTA"})
    assert r.status_code == 400 and "checkpointType" in r.json()["errors"][0]
    r = api.post(f"/jobs/{jid}/stop", json={}, headers={"Authorization": ""})
    assert r.status_code == 401
    audit = api.get("/audit", params={"limit": 20}).json()["entries"]
    assert any(e["action"] == "savepoint" and e["status"] == 401 and e["job_id"] == jid for e in audit)


def test_an_unwritable_target_directory_is_refused(api: TestClient, rds: redis.Redis, tmp_path: Path) -> None:
    jid, _ = running_job(api, rds)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    r = api.post(f"/jobs/{jid}/savepoints", json={"target-directory": str(blocker / "sp")})
    assert r.status_code == 400 and "savepoint directory" in r.json()["errors"][0] and "not writable" in r.json()["errors"][0]
    assert api.get(f"/jobs/{jid}/savepoints").json() == {"savepoints": []}


def test_a_manual_checkpoint_is_triggered_and_polled(api: TestClient, rds: redis.Redis) -> None:
    jid, tasks = running_job(api, rds)
    r = api.post(f"/jobs/{jid}/checkpoints", json={"checkpointType": "FULL", "triggerId": "manual-1"})
    assert (r.status_code, r.json()) == (202, {"request-id": "manual-1"})
    cid, _, _, kind, _ = tasks.inbox("trigger_checkpoint")[0]["barrier"]
    assert kind == "CHECKPOINT"
    assert api.get(f"/jobs/{jid}/checkpoints/manual-1").json()["status"]["id"] == "IN_PROGRESS"
    tasks.ack(cid)
    done = wait_for(lambda: (s := api.get(f"/jobs/{jid}/checkpoints/manual-1").json())["status"]["id"] == "COMPLETED" and s)
    assert done["operation"] == {"checkpointId": cid}
    assert api.get(f"/jobs/{jid}/checkpoints/config").status_code == 404  # periodic checkpointing is still off


def test_history_and_trigger_ids_survive_a_jobmanager_restart(settings: Settings, rds: redis.Redis, tmp_path: Path) -> None:
    with TestClient(create_app(settings)) as api:
        api.headers["Authorization"] = "Bearer tok"
        jid, tasks = running_job(api, rds)
        api.post(f"/jobs/{jid}/savepoints", json={"target-directory": str(tmp_path / "sp"), "triggerId": "t-1"})
        tasks.ack(tasks.inbox("trigger_checkpoint")[0]["barrier"][0])
        wait_for(lambda: status(api, jid, "t-1")["status"]["id"] == "COMPLETED")
        api.patch(f"/jobs/{jid}")
        tasks.report("CANCELED")
        wait_for(lambda: api.get(f"/jobs/{jid}").json()["state"] == "CANCELED")
        before = api.get(f"/jobs/{jid}/checkpoints").json()
    with TestClient(create_app(settings)) as api:  # a new JobManager on the same database
        api.headers["Authorization"] = "Bearer tok"
        after = api.get(f"/jobs/{jid}/checkpoints")
        assert after.status_code == 200, after.text
        assert after.json()["counts"] == before["counts"] and after.json()["history"] == before["history"]
        assert status(api, jid, "t-1")["operation"]["location"] == before["latest"]["savepoint"]["external_path"]
        # the same trigger id after the restart: the same request, no second savepoint
        r = api.post(f"/jobs/{jid}/savepoints", json={"triggerId": "t-1"})
        assert (r.status_code, r.json()) == (202, {"request-id": "t-1"})
        r = api.post(f"/jobs/{jid}/savepoints", json={"triggerId": "t-2"})
        assert r.status_code == 409 and "CANCELED" in r.json()["errors"][0]
        assert len(api.get(f"/jobs/{jid}/savepoints").json()["savepoints"]) == 1



def test_savepoint_disposal_answers_in_flinks_shape_and_deletes_only_savepoints(api: TestClient, settings: Settings):
    from millstream.engine.checkpoint.storage import FileSystemCheckpointStorage

    root = Path(settings.resolved_savepoint_dir)
    storage = FileSystemCheckpointStorage(str(root))
    location = str(root / "savepoint-abc123-0001")
    Path(location).mkdir(parents=True)
    storage.write_metadata("j" * 32, 1, {"checkpoint_id": 1, "operators": []}, location=location)
    r = api.post("/savepoint-disposal", json={"savepoint-path": location})
    assert r.status_code == 202, r.text
    status = api.get(f"/savepoint-disposal/{r.json()['request-id']}").json()
    assert status == {"status": {"id": "COMPLETED"}, "operation": {}}
    assert not Path(location).exists()

    # Not a savepoint's name, or no _metadata: a failure cause, and the directory stays.
    keep = root / "chk-7"
    keep.mkdir()
    for path in (str(keep), str(root / "savepoint-empty")):
        Path(path).mkdir(exist_ok=True)
        r = api.post("/v1/savepoint-disposal", json={"savepoint-path": path})
        cause = api.get(f"/savepoint-disposal/{r.json()['request-id']}").json()["operation"]["failure-cause"]
        assert "cannot dispose" in cause["stack-trace"] or "only savepoints" in cause["stack-trace"], cause
        assert Path(path).exists()
    assert api.post("/savepoint-disposal", json={}).status_code in (400, 422)
    assert api.get("/savepoint-disposal/nope").status_code == 404
    assert api.post("/savepoint-disposal", json={"savepoint-path": location}, headers={"Authorization": ""}).status_code == 401
