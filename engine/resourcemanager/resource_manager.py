"""ResourceManager: keeps the SlotPool in step with TaskManagers registered in Redis.

A TaskManager is alive while its heartbeat key exists; the key's TTL is the
heartbeat timeout, so a dead TaskManager is noticed within that timeout.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis

from engine import redis_keys
from engine.resourcemanager.slot_pool import SlotPool, TaskManagerInfo
from engine.taskexecutor import messages


@dataclass(frozen=True)
class Membership:
    joined: list[str]
    lost: list[str]


class ResourceManager:
    def __init__(self, client: redis.Redis, pool: SlotPool) -> None:
        self.client = client
        self.pool = pool

    def refresh(self) -> Membership:
        registry = self.client.hgetall(redis_keys.TASKMANAGERS)
        ids = [k.decode() for k in registry]
        pipe = self.client.pipeline(transaction=False)
        for tm in ids:
            pipe.get(redis_keys.taskmanager_heartbeat(tm))
        beats = pipe.execute() if ids else []
        joined, lost = [], []
        alive = set()
        for (raw_id, raw_info), beat in zip(registry.items(), beats):
            tm = raw_id.decode()
            if beat is None:
                continue
            alive.add(tm)
            info: dict[str, Any] = messages.unpack(raw_info)
            existing = self.pool.taskmanagers.get(tm)
            record = TaskManagerInfo(
                id=tm,
                slots=int(info["slots"]),
                host=info.get("host", ""),
                registered_ms=existing.registered_ms if existing else int(time.time() * 1000),
                last_heartbeat_ms=int(beat),
                details=info,
            )
            if self.pool.register(record):
                joined.append(tm)
        for tm in list(self.pool.taskmanagers):
            if tm not in alive:
                lost.append(tm)
        # Registry entries whose heartbeat expired belong to dead TaskManagers.
        dead = [tm for tm in ids if tm not in alive]
        if dead:
            self.client.hdel(redis_keys.TASKMANAGERS, *dead)
        return Membership(joined, lost)

    def taskmanager_metrics(self, tm_id: str) -> dict[str, Any]:
        raw = self.client.get(redis_keys.taskmanager_metrics(tm_id))
        return messages.unpack(raw) if raw else {}
