"""Channels over Redis lists, with credit-based flow control.

Data buffers go to ``ms:ch:...`` with RPUSH; the consumer pops them with BLPOP
over all its unblocked channels at once. Each consumed buffer returns a credit
token on ``ms:cr:...``. A producer starts with N credits and blocks when it has
none, so at most N unread buffers ever sit in Redis per channel, however slow
the consumer. Credit fetches ride in the same round trip as the next push.

A task's channels talk to Redis over connections of their own (``RedisLink``):
only the task's thread uses them, so the pool's per-command checkout, liveness
probe and retry wrapper, which cost more than the round trip itself, are skipped.
A broken connection fails the task, and the restart strategy takes over.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import redis

from engine import redis_keys
from engine.runtime.io.channel import ChannelId, TaskCancelled
from engine.runtime.io.frames import FramedInputGate

_POLL_SLICE = 0.1  # seconds; how often a blocked wait re-checks cancellation


class RedisLink:
    """One connection used by one thread: commands written straight to the socket, replies read in order."""

    def __init__(self, client: redis.Redis) -> None:
        # Same host, credentials and TLS settings as the client, but outside its pool.
        self.conn: Any = client.connection_pool.make_connection()

    def call(self, *args: Any) -> Any:
        return self.pipeline([args])[0]

    def pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        conn = self.conn
        try:
            conn.send_packed_command(conn.pack_commands(commands), check_health=False)
            return [conn.read_response() for _ in commands]
        except BaseException:
            # Replies may be left unread: the connection cannot be trusted for the next command.
            conn.disconnect()
            raise

    def close(self) -> None:
        self.conn.disconnect()


class RedisChannelWriter:
    def __init__(self, link: RedisLink, cid: ChannelId, credits: int, cancelled: threading.Event) -> None:
        self.link = link
        self.data_key = redis_keys.channel(cid.job_id, cid.attempt, cid.edge, cid.src, cid.dst)
        self.credit_key = redis_keys.credit(cid.job_id, cid.attempt, cid.edge, cid.src, cid.dst)
        self.initial = credits
        self.credits = credits
        self.cancelled = cancelled
        self.blocked_since: float | None = None  # set while waiting for credit, read by the metrics sampler

    def send(self, payload: bytes, is_data: bool) -> float:
        blocked = 0.0
        if is_data and self.credits <= 0:
            t0 = self.blocked_since = time.monotonic()
            while self.credits <= 0:
                if self.cancelled.is_set():
                    self.blocked_since = None
                    raise TaskCancelled()
                got = self.link.call("BLPOP", self.credit_key, _POLL_SLICE)
                if got:
                    self.credits += 1
                    more = self.link.call("LPOP", self.credit_key, self.initial)
                    self.credits += len(more or ())
            self.blocked_since = None
            blocked = time.monotonic() - t0
        if is_data:
            self.credits -= 1
        if is_data and self.credits < self.initial // 2:
            # Piggyback a non-blocking credit fetch on the push: one round trip.
            _, more = self.link.pipeline([("RPUSH", self.data_key, payload), ("LPOP", self.credit_key, self.initial)])
            self.credits += len(more or ())
        else:
            self.link.call("RPUSH", self.data_key, payload)
        return blocked

    def close(self) -> None:
        pass


class RedisInputGate:
    def __init__(self, link: RedisLink, cids: list[ChannelId], cancelled: threading.Event) -> None:
        self.link = link
        self.keys = [redis_keys.channel(c.job_id, c.attempt, c.edge, c.src, c.dst) for c in cids]
        self.credit_keys = [redis_keys.credit(c.job_id, c.attempt, c.edge, c.src, c.dst) for c in cids]
        self.index = {k.encode(): i for i, k in enumerate(self.keys)}
        self.blocked: set[int] = set()
        self.cancelled = cancelled
        self.pending_acks: list[int] = []
        self._rotate = 0

    def poll(self, timeout: float) -> tuple[int, bytes] | None:
        if self.cancelled.is_set():
            raise TaskCancelled()
        open_keys = [k for i, k in enumerate(self.keys) if i not in self.blocked]
        if not open_keys:
            self._flush_acks()
            time.sleep(min(timeout, _POLL_SLICE))
            return None
        # Rotate the key order so BLPOP's first-key preference does not starve a channel.
        self._rotate = (self._rotate + 1) % len(open_keys)
        open_keys = open_keys[self._rotate :] + open_keys[: self._rotate]
        wait = max(0.01, min(timeout, _POLL_SLICE))
        # Deferred credits go back in the same round trip as the next BLPOP.
        commands: list[tuple[Any, ...]] = [("RPUSH", self.credit_keys[i], 1) for i in self.pending_acks]
        commands.append(("BLPOP", *open_keys, wait))
        got = self.link.pipeline(commands)[-1]
        self.pending_acks.clear()
        if not got:
            return None
        key, value = got
        return self.index[key if isinstance(key, bytes) else key.encode()], value

    def ack(self, channel_index: int) -> None:
        # Deferred: sent with the next BLPOP in one round trip.
        self.pending_acks.append(channel_index)

    def _flush_acks(self) -> None:
        if self.pending_acks:
            self.link.pipeline([("RPUSH", self.credit_keys[i], 1) for i in self.pending_acks])
            self.pending_acks.clear()

    def block(self, channel_index: int) -> None:
        self.blocked.add(channel_index)

    def unblock(self, channel_index: int) -> None:
        self.blocked.discard(channel_index)

    def close(self) -> None:
        try:
            self._flush_acks()
        finally:
            self.link.close()


class RedisChannelFactory:
    """One task's channels. Its record writers share one link and its input gate has its own,
    because the writers still send END_OF_PARTITION after the gate is closed."""

    def __init__(self, client: redis.Redis, credits: int, cancelled: threading.Event) -> None:
        self.client = client
        self.credits = credits
        self.cancelled = cancelled
        self._writer_link: RedisLink | None = None

    def writer(self, channel: ChannelId) -> RedisChannelWriter:
        if self._writer_link is None:
            self._writer_link = RedisLink(self.client)
        return RedisChannelWriter(self._writer_link, channel, self.credits, self.cancelled)

    def gate(self, channels: list[ChannelId]) -> FramedInputGate:
        return FramedInputGate(RedisInputGate(RedisLink(self.client), channels, self.cancelled), len(channels))
