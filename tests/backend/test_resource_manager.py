"""The ResourceManager against a real Redis: a TaskManager is lost when nothing fresh was heard from it
for the heartbeat timeout, not the moment a Redis that restarted empty holds no heartbeat for it."""
from __future__ import annotations

import time

import redis

from millstream.engine import redis_keys
from millstream.engine.resourcemanager.resource_manager import ResourceManager
from millstream.engine.resourcemanager.slot_pool import SlotPool
from millstream.engine.taskexecutor import messages

SECRET = "resource-manager-test-secret"
TM = "10.0.0.1:1234-abcdef"
TIMEOUT_MS = 3000


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _register(rds: redis.Redis, beat_ts: int) -> None:
    """What a TaskExecutor writes: its registry entry and its heartbeat."""
    rds.hset(redis_keys.TASKMANAGERS, TM, messages.seal_report({"slots": 2, "host": "10.0.0.1"}, SECRET, "registration", TM))
    rds.set(redis_keys.taskmanager_heartbeat(TM), messages.seal_report({"ts": beat_ts}, SECRET, "heartbeat", TM), px=TIMEOUT_MS)


def test_a_redis_that_restarted_empty_loses_no_taskmanager_before_the_heartbeat_timeout(redis_url: str) -> None:
    rds = redis.Redis.from_url(redis_url)
    clock = Clock()
    pool = SlotPool()
    rm = ResourceManager(rds, pool, SECRET, TIMEOUT_MS, monotonic=clock)
    beat = int(time.time() * 1000)
    _register(rds, beat)
    assert rm.refresh().joined == [TM]

    rds.flushall()  # Redis restarted empty: no registry entry, no heartbeat
    clock.now += 1.0
    assert rm.refresh().lost == [] and TM in pool.taskmanagers
    _register(rds, beat + 1500)  # the TaskManager's next heartbeat reaches the new server
    clock.now += 1.0
    m = rm.refresh()
    assert m.lost == [] and m.joined == []

    # A TaskManager that stays silent is lost once the timeout has passed since it was last heard.
    rds.flushall()
    clock.now += 2.5
    assert rm.refresh().lost == []
    clock.now += 1.0
    assert rm.refresh().lost == [TM]
    rds.close()
