"""SlotExecutor.deploy against a real valkey: only user code signed with the cluster secret
is unpickled; forged or tampered code fails the task and never runs."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import cloudpickle
import pytest
import redis

from millstream.engine import redis_keys
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.runtime.deployment import make_tdd
from millstream.engine.security.mac import MissingSecret
from millstream.engine.taskexecutor import code_signing, messages
from millstream.engine.taskexecutor.gateway import RedisTaskExecutorGateway
from millstream.engine.taskexecutor.slot_process import SlotConfig, SlotExecutor

SECRET = "cluster-secret-for-tests"


class _Planted:
    """A pickle that leaves a mark when it is loaded: proof that forged code ran."""

    def __init__(self, mark: Path) -> None:
        self.mark = mark

    def __reduce__(self):
        return (Path.write_text, (self.mark, "the forged pickle was loaded"))


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def job():
    env = StreamExecutionEnvironment().set_parallelism(1)
    env.from_collection([1, 2, 3]).map(lambda x: x * 2).print()
    return env.get_job_graph("signed-job")


def deploy(client: redis.Redis, redis_url: str, job_graph, secret: str | None = SECRET) -> list[dict[str, Any]]:
    executor = SlotExecutor(SlotConfig("tm-test", 0, redis_url, cluster_secret=secret), client)
    tdd = make_tdd(job_graph, job_graph.vertices[0].id, 0, 1)
    executor.deploy(tdd)
    inbox = redis_keys.JOBMANAGER_INBOX
    reports = [messages.open_message(raw, SECRET, inbox) for raw in client.lrange(inbox, 0, -1)]
    with executor.lock:  # a task thread removes itself when it ends
        deployed = list(executor.tasks.values())
    for running in deployed:  # a deployed task is stopped again: only deploy is under test
        running.task.cancel()
        running.thread.join(10)
    return reports


def test_code_uploaded_by_the_gateway_is_deployed(client: redis.Redis, redis_url: str):
    job_graph, stream_graph = job()
    RedisTaskExecutorGateway(client, SECRET).upload_user_code(job_graph.job_id, cloudpickle.dumps(stream_graph))
    stored = client.get(redis_keys.job_user_code(job_graph.job_id))
    assert stored.startswith(code_signing.MAGIC)  # never stored bare
    reports = deploy(client, redis_url, job_graph)
    assert reports[0]["state"] == "INITIALIZING", reports


@pytest.mark.parametrize(
    "forge, exc_name",
    [
        (lambda code, jid: code, "UnsignedPayload"),  # a bare pickle, as an attacker with Redis access would write
        (lambda code, jid: code_signing.sign("a-guessed-secret", jid, code), "TamperedPayload"),
        (lambda code, jid: code_signing.sign(SECRET, "0" * 32, code), "TamperedPayload"),  # signed for another job
    ],
)
def test_forged_code_in_redis_is_refused_and_never_unpickled(
    client: redis.Redis, redis_url: str, tmp_path: Path, forge, exc_name: str
):
    job_graph, _ = job()
    mark = tmp_path / "pwned"
    client.set(redis_keys.job_user_code(job_graph.job_id), forge(cloudpickle.dumps(_Planted(mark)), job_graph.job_id))
    reports = deploy(client, redis_url, job_graph)
    assert not mark.exists(), "forged user code was unpickled"
    [report] = reports
    assert report["state"] == "FAILED"
    assert report["exception_name"] == exc_name, report
    assert exc_name in report["error"]


def test_tampering_with_signed_code_is_refused(client: redis.Redis, redis_url: str, tmp_path: Path):
    job_graph, stream_graph = job()
    gateway = RedisTaskExecutorGateway(client, SECRET)
    gateway.upload_user_code(job_graph.job_id, cloudpickle.dumps(stream_graph))
    key = redis_keys.job_user_code(job_graph.job_id)
    mark = tmp_path / "pwned"
    signed = client.get(key)
    header = signed[: len(code_signing.MAGIC) + code_signing.MAC_BYTES]
    client.set(key, header + cloudpickle.dumps(_Planted(mark)))  # the real signature, a different payload
    [report] = deploy(client, redis_url, job_graph)
    assert not mark.exists()
    assert (report["state"], report["exception_name"]) == ("FAILED", "TamperedPayload")


def test_a_slot_without_the_secret_runs_nothing(client: redis.Redis, redis_url: str):
    job_graph, stream_graph = job()
    RedisTaskExecutorGateway(client, SECRET).upload_user_code(job_graph.job_id, cloudpickle.dumps(stream_graph))
    # It does not even start: it could neither check code nor seal its reports (engine/security/mac.py).
    with pytest.raises(MissingSecret, match="MILLSTREAM_CLUSTER_SECRET"):
        deploy(client, redis_url, job_graph, secret=None)
    assert client.llen(redis_keys.JOBMANAGER_INBOX) == 0
