"""Stop-with-savepoint through the TaskExecutor's real control path: the gateway's messages go through
Redis to a SlotExecutor running a real task. An aborted stop resumes the source; a completed one
finishes the task."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import cloudpickle
import pytest
import redis

from millstream.engine import redis_keys
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.connectors import DataGeneratorSource
from millstream.engine.runtime.checkpointing import Barrier
from millstream.engine.runtime.deployment import make_tdd
from millstream.engine.taskexecutor import messages
from millstream.engine.taskexecutor.gateway import RedisTaskExecutorGateway
from millstream.engine.taskexecutor.slot_process import SlotConfig, SlotExecutor
from tests.engine.progress import idled, until

SECRET = "cluster-secret-for-tests"
TM = "tm-savepoint"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _deliver(client: redis.Redis, slot: SlotExecutor) -> None:
    """What SlotExecutor.serve does with each message in its inbox."""
    while (raw := client.lpop(slot.inbox)) is not None:
        slot.handle(messages.open_message(raw, SECRET, slot.inbox))


def _wait_for(client: redis.Redis, kind: str, timeout: float = 10.0, **match: Any) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for raw in client.lrange(redis_keys.JOBMANAGER_INBOX, 0, -1):
            msg = messages.open_message(raw, SECRET, redis_keys.JOBMANAGER_INBOX)
            if msg["type"] == kind and all(msg.get(k) == v for k, v in match.items()):
                return msg
        time.sleep(0.02)
    raise AssertionError(f"no {kind} {match} reached the JobManager")


def test_abort_resumes_the_source_and_completion_finishes_the_task(client: redis.Redis, redis_url: str, tmp_path: Path):
    env = StreamExecutionEnvironment().set_parallelism(1)
    env.from_source(DataGeneratorSource(lambda i: i, None, 2000), None, "gen").map(lambda x: x + 1).print()
    job_graph, stream_graph = env.get_job_graph("stop-with-savepoint")
    gateway = RedisTaskExecutorGateway(client, SECRET)
    gateway.upload_user_code(job_graph.job_id, cloudpickle.dumps(stream_graph))
    slot = SlotExecutor(SlotConfig(TM, 0, redis_url, cluster_secret=SECRET), client)
    vertex = job_graph.vertices[0].id
    slot.deploy(make_tdd(job_graph, vertex, 0, 0))
    (running,) = slot.tasks.values()
    try:
        time.sleep(0.2)
        for cid in (1, 2):
            barrier = Barrier(cid, int(time.time() * 1000), str(tmp_path / f"chk-{cid}"), "SYNC_SAVEPOINT", False)
            gateway.trigger_checkpoint(TM, 0, messages.trigger_checkpoint(job_graph.job_id, 0, vertex, 0, barrier.to_wire()))
            _deliver(client, slot)
            _wait_for(client, "checkpoint_ack", checkpoint_id=cid)
            polled = running.task.reader.snapshot()
            idled([running.task], 0.3)  # it had the chance to go on, and
            assert running.thread.is_alive(), "the task waits for the savepoint's outcome"
            assert running.task.reader.snapshot() == polled, "the source reads nothing while the stop is pending"
            if cid == 1:
                gateway.notify_checkpoint_aborted(TM, 0, messages.notify_checkpoint_aborted(job_graph.job_id, 0, 1, "test"))
                _deliver(client, slot)
                until(lambda: running.task.reader.snapshot() != polled, "after the abort the source reads again")
            else:
                gateway.notify_checkpoint_complete(TM, 0, messages.notify_checkpoint_complete(job_graph.job_id, 0, 2))
                _deliver(client, slot)
        running.thread.join(10)
        assert not running.thread.is_alive()
        _wait_for(client, "task_state", state="FINISHED")
    finally:
        running.task.cancel()
        running.thread.join(10)
