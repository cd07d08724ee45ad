"""ResourceManager: keeps the SlotPool in step with TaskManagers registered in Redis.

A TaskManager is alive while its heartbeat key exists; the key's TTL is the
heartbeat timeout, so a dead TaskManager is noticed within that timeout.

Registrations and heartbeats are sealed with the cluster secret by the TaskManager they name
(engine/taskexecutor/messages.py ``seal_report``). One not sealed by this cluster for that TaskManager
counts as absent, so a TaskManager written into Redis by someone else is never given slots. A
heartbeat counts only while the time sealed in it moves on: a genuine heartbeat copied and set again
later keeps a dead TaskManager alive for one heartbeat timeout at most.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import redis

from millstream.engine import redis_keys
from millstream.engine.resourcemanager.slot_pool import SlotPool, TaskManagerInfo
from millstream.engine.taskexecutor import messages


@dataclass(frozen=True)
class Membership:
    joined: list[str]
    lost: list[str]


class ResourceManager:
    def __init__(
        self, client: redis.Redis, pool: SlotPool, secret: str | bytes | None = None, heartbeat_timeout_ms: int = 10_000,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.pool = pool
        self.secret = secret
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.monotonic = monotonic
        # tm -> (the newest heartbeat time it sealed, when this JobManager first saw that time)
        self._beats: dict[str, tuple[int, float]] = {}

    def _beat(self, tm: str, raw: bytes | None) -> int | None:
        """The time of ``tm``'s heartbeat if it is genuine and has moved on within the timeout."""
        beat = messages.open_report(raw, self.secret, "heartbeat", tm)
        ts = beat.get("ts") if beat else None
        if not isinstance(ts, int):
            return None
        now = self.monotonic()
        last = self._beats.get(tm)
        if last is None or ts > last[0]:
            self._beats[tm] = last = (ts, now)
        return ts if (now - last[1]) * 1000 <= self.heartbeat_timeout_ms else None

    def refresh(self) -> Membership:
        registry = self.client.hgetall(redis_keys.TASKMANAGERS)
        ids = [k.decode() for k in registry]
        pipe = self.client.pipeline(transaction=False)
        for tm in ids:
            pipe.get(redis_keys.taskmanager_heartbeat(tm))
        beats = pipe.execute() if ids else []
        joined, lost = [], []
        alive = set()
        for (raw_id, raw_info), raw_beat in zip(registry.items(), beats):
            tm = raw_id.decode()
            beat = self._beat(tm, raw_beat)
            info = messages.open_report(raw_info, self.secret, "registration", tm)
            existing = self.pool.taskmanagers.get(tm)
            if info is None and existing is not None:
                info = existing.details  # overwritten by someone else: the last genuine one still holds
            if beat is None or info is None or not isinstance(info.get("slots"), int):
                continue
            alive.add(tm)
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
        now = self.monotonic()
        for tm in list(self.pool.taskmanagers):
            if tm in alive:
                continue
            # Lost once nothing fresh was heard from it for the timeout, not merely because Redis holds
            # no heartbeat now: a Redis that restarted empty holds none until each TaskManager writes
            # its next, and failing a job onto that race was wrong (seen under load in CI).
            heard = self._beats.get(tm)
            if heard is not None and (now - heard[1]) * 1000 <= self.heartbeat_timeout_ms:
                continue
            lost.append(tm)
        # Registry entries whose heartbeat expired belong to dead TaskManagers.
        dead = [tm for tm, raw_beat in zip(ids, beats) if raw_beat is None]
        if dead:
            self.client.hdel(redis_keys.TASKMANAGERS, *dead)
        for tm in set(self._beats) - set(ids) - (set(self.pool.taskmanagers) - set(lost)):
            del self._beats[tm]
        return Membership(joined, lost)

    def taskmanager_metrics(self, tm_id: str) -> dict[str, Any]:
        raw = self.client.get(redis_keys.taskmanager_metrics(tm_id))
        return messages.open_report(raw, self.secret, "tm-metrics", tm_id) or {}
