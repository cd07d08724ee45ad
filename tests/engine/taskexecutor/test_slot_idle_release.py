"""A slot frees an ended job's memory once it is idle and its inbox stayed quiet, not the moment its
last task ends: a job's sources often end before its other tasks reach the slot, and the full
collection holds the interpreter lock while those deploys wait. Real Redis, real tasks."""
from __future__ import annotations

import gc
import weakref
from typing import Iterator

import cloudpickle
import pytest
import redis

from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.connectors import DataGeneratorSource
from millstream.engine.runtime.deployment import make_tdd
from millstream.engine.taskexecutor.gateway import RedisTaskExecutorGateway
from millstream.engine.taskexecutor.slot_process import SlotConfig, SlotExecutor

SECRET = "cluster-secret-for-tests"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _full_collections() -> int:
    return gc.get_stats()[2]["collections"]


def test_the_slot_frees_an_ended_job_when_idle_and_never_while_a_task_runs(client: redis.Redis, redis_url: str) -> None:
    env = StreamExecutionEnvironment().set_parallelism(1)
    env.from_source(DataGeneratorSource(lambda i: i, 20, None), None, "gen").map(lambda x: x + 1).print()
    job_graph, stream_graph = env.get_job_graph("bounded")
    RedisTaskExecutorGateway(client, SECRET).upload_user_code(job_graph.job_id, cloudpickle.dumps(stream_graph))
    slot = SlotExecutor(SlotConfig("tm-idle", 0, redis_url, cluster_secret=SECRET), client)
    vertex = job_graph.vertices[0].id

    gc.collect()
    gc.disable()  # only the slot collects here, so the counts below are its own
    try:
        slot.deploy(make_tdd(job_graph, vertex, 0, 0))
        (running,) = slot.tasks.values()
        loader = weakref.ref(running.task.graph.class_loader)
        running.thread.join(10)
        del running
        assert not slot.tasks and slot.release_pending
        collections = _full_collections()
        # The job's next task may be on its way: nothing was collected when the last one ended. (The
        # task's own objects may already be gone by reference counting: a task holds no cycle through
        # its checkpointer since heap bases stopped being forked, so its user code can go before the
        # collection; what must not happen here is the collection.)
        assert _full_collections() == collections

        slot.deploy(make_tdd(job_graph, vertex, 0, 1))  # a task arrived meanwhile (a next attempt)
        (running,) = slot.tasks.values()
        slot._release_if_idle()  # the inbox was quiet, but a task runs: nothing is collected under it
        assert _full_collections() == collections
        running.thread.join(10)
        del running

        slot._release_if_idle()  # idle, and the inbox stayed quiet for a poll
        assert _full_collections() == collections + 1
        assert loader() is None  # the ended job's user code is gone
        slot._release_if_idle()  # once per time the slot runs out of tasks
        assert _full_collections() == collections + 1
    finally:
        gc.enable()
