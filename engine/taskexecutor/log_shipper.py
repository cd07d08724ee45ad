"""A TaskManager's log, readable from the JobManager on another host.

Each process of a TaskManager (the TaskManager itself and its slot processes) adds a
``RedisLogShipper`` to its root logger: records are formatted, sealed with the cluster secret for
that TaskManager's log list, and pushed to Redis in batches by a background thread, the list capped
at ``MAX_LINES``. The JobManager's REST API and dashboard read it (``read_log``) when the
TaskManager's log file is not on the JobManager's disk, as on a multi-host cluster. Logging never
waits for Redis: lines wait in a bounded buffer, and the oldest are dropped while Redis is away.
"""
from __future__ import annotations

import collections
import logging
import threading
from typing import Any

import redis

from millstream.engine import redis_keys
from millstream.engine.runtime.process_logging import JobContextFilter
from millstream.engine.security.mac import Sealer, Unauthenticated

#: lines kept per TaskManager in Redis
MAX_LINES = 5000
#: lines a process holds while Redis is away before it drops the oldest
BUFFER_LINES = 10_000
FLUSH_S = 0.5
#: how long a TaskManager's log stays after its last line (a dead TaskManager's log can be read)
KEEP_S = 7 * 24 * 3600


def _sealer(secret: str | None, tm_id: str) -> Sealer:
    return Sealer(secret, "tmlog", redis_keys.taskmanager_log(tm_id))


class RedisLogShipper(logging.Handler):
    def __init__(self, client: redis.Redis, tm_id: str, secret: str | None) -> None:
        super().__init__(logging.INFO)
        self.client = client
        self.key = redis_keys.taskmanager_log(tm_id)
        self.sealer = _sealer(secret, tm_id)
        self.pending: collections.deque[bytes] = collections.deque(maxlen=BUFFER_LINES)
        self.wake = threading.Event()
        self.thread = threading.Thread(target=self._run, name="log-shipper", daemon=True)
        self.thread.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.pending.append(self.sealer.seal(self.format(record).encode("utf-8", "replace")))
        except Exception:
            self.handleError(record)

    def _run(self) -> None:
        while True:
            self.wake.wait(FLUSH_S)
            self.wake.clear()
            self._flush_once()

    def _flush_once(self) -> None:
        if not self.pending:
            return
        batch = list(self.pending)
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.rpush(self.key, *batch)
            pipe.ltrim(self.key, -MAX_LINES, -1)
            pipe.expire(self.key, KEEP_S)
            pipe.execute()
        except redis.RedisError:
            return  # kept for the next round; the deque drops the oldest meanwhile
        for _ in batch:
            try:
                self.pending.popleft()
            except IndexError:
                break

    def flush(self) -> None:
        self._flush_once()


def ship_logs(client: redis.Redis, tm_id: str, secret: str | None, fmt: str) -> RedisLogShipper:
    """Add a shipper to this process's root logger."""
    handler = RedisLogShipper(client, tm_id, secret)
    handler.setFormatter(logging.Formatter(fmt))
    handler.addFilter(JobContextFilter())  # the format may name the job of the logging task thread
    logging.getLogger().addHandler(handler)
    return handler


def read_log(client: Any, tm_id: str, secret: str | None, max_lines: int = MAX_LINES) -> str | None:
    """The TaskManager's shipped log, oldest line first; None when it shipped none. Lines not sealed
    for this TaskManager (written into Redis by someone else) are left out."""
    raw = client.lrange(redis_keys.taskmanager_log(tm_id), -max_lines, -1)
    if not raw:
        return None
    sealer = _sealer(secret, tm_id)
    lines = []
    for item in raw:
        try:
            lines.append(sealer.open(item).decode("utf-8", "replace"))
        except Unauthenticated:
            continue
    return "\n".join(lines) + "\n"
