"""A slot keeps the final state of the tasks that ended in it and offers them to a JobManager that
asks what it runs (issue 18): a FINISHED report sent while no JobManager led is sealed for the dead
one's epoch and refused by its successor, so the task offer is the only way the new leader learns of
it. Real Redis, a real task; the JobManager's side is its gateway."""
from __future__ import annotations

from typing import Iterator

import cloudpickle
import pytest
import redis

from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.connectors import DataGeneratorSource
from millstream.engine.runtime.deployment import make_tdd
from millstream.engine.taskexecutor import messages
from millstream.engine.taskexecutor.gateway import RedisTaskExecutorGateway
from millstream.engine.taskexecutor.slot_process import SlotConfig, SlotExecutor

SECRET = "cluster-secret-for-tests"
TM = "tm-ended"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _deliver(client: redis.Redis, slot: SlotExecutor) -> None:
    """What SlotExecutor.serve does with each message in its inbox."""
    while (raw := client.lpop(slot.inbox)) is not None:
        slot.handle(messages.open_message(raw, SECRET, slot.inbox))


def _offered(client: redis.Redis, slot: SlotExecutor, gateway: RedisTaskExecutorGateway, request: str) -> list[tuple]:
    gateway.request_task_report(TM, 0, request)
    _deliver(client, slot)
    (offer,) = gateway.task_offers(request).values()
    return sorted((t["vertex"], t["subtask"], t["attempt"], t["state"]) for t in offer["tasks"])


def test_a_task_that_ended_is_offered_with_its_final_state_until_a_jobmanager_gives_its_attempt_up(
    client: redis.Redis, redis_url: str
) -> None:
    env = StreamExecutionEnvironment().set_parallelism(1)
    env.from_source(DataGeneratorSource(lambda i: i, 20, None), None, "gen").map(lambda x: x + 1).print()
    job_graph, stream_graph = env.get_job_graph("bounded")
    old = RedisTaskExecutorGateway(client, SECRET, epoch=5)
    old.upload_user_code(job_graph.job_id, cloudpickle.dumps(stream_graph))
    slot = SlotExecutor(SlotConfig(TM, 0, redis_url, cluster_secret=SECRET), client)
    vertex = job_graph.vertices[0].id
    old.request_task_report(TM, 0, "from-the-old-leader")  # the slot now seals its reports for epoch 5
    _deliver(client, slot)
    slot.deploy(make_tdd(job_graph, vertex, 0, 0))
    (running,) = slot.tasks.values()
    running.thread.join(10)
    assert not running.thread.is_alive() and not slot.tasks  # the input ran out: FINISHED, reported for epoch 5

    new = RedisTaskExecutorGateway(client, SECRET, epoch=6)  # the leader that took over
    assert _offered(client, slot, new, "takeover") == [(vertex, 0, 0, "FINISHED")]
    assert _offered(client, slot, new, "again") == [(vertex, 0, 0, "FINISHED")]  # kept until given up
    new.cancel_job(TM, 0, job_graph.job_id, 0)  # the JobManager gave attempt 0 up (it restarts the job)
    _deliver(client, slot)
    assert _offered(client, slot, new, "after-cancel") == []
