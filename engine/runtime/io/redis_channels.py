"""Channels over Redis lists, with credit-based flow control.

Data buffers go to ``ms:ch:...`` with RPUSH; the consumer pops them with BLPOP
over all its unblocked channels at once. Each consumed buffer returns a credit
token on ``ms:cr:...``. A producer starts with N credits and blocks when it has
none, so at most N unread buffers ever sit in Redis per channel, however slow
the consumer. Credit fetches ride in the same round trip as the next push.
"""
from __future__ import annotations

import threading
import time

import redis

from engine import redis_keys
from engine.runtime.io.channel import ChannelId, TaskCancelled
from engine.runtime.io.frames import FramedInputGate

_POLL_SLICE = 0.1  # seconds; how often a blocked wait re-checks cancellation


class RedisChannelWriter:
    def __init__(self, client: redis.Redis, cid: ChannelId, credits: int, cancelled: threading.Event) -> None:
        self.client = client
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
                got = self.client.blpop([self.credit_key], timeout=_POLL_SLICE)
                if got:
                    self.credits += 1
                    more = self.client.lpop(self.credit_key, self.initial)
                    self.credits += len(more or ())
            self.blocked_since = None
            blocked = time.monotonic() - t0
        if is_data:
            self.credits -= 1
        if is_data and self.credits < self.initial // 2:
            # Piggyback a non-blocking credit fetch on the push: one round trip.
            pipe = self.client.pipeline(transaction=False)
            pipe.rpush(self.data_key, payload)
            pipe.lpop(self.credit_key, self.initial)
            _, more = pipe.execute()
            self.credits += len(more or ())
        else:
            self.client.rpush(self.data_key, payload)
        return blocked

    def close(self) -> None:
        pass


class RedisInputGate:
    def __init__(self, client: redis.Redis, cids: list[ChannelId], cancelled: threading.Event) -> None:
        self.client = client
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
        if self.pending_acks:
            pipe = self.client.pipeline(transaction=False)
            for i in self.pending_acks:
                pipe.rpush(self.credit_keys[i], 1)
            pipe.blpop(open_keys, timeout=wait)
            got = pipe.execute()[-1]
            self.pending_acks.clear()
        else:
            got = self.client.blpop(open_keys, timeout=wait)
        if not got:
            return None
        key, value = got
        return self.index[key if isinstance(key, bytes) else key.encode()], value

    def ack(self, channel_index: int) -> None:
        # Deferred: sent with the next BLPOP in one round trip.
        self.pending_acks.append(channel_index)

    def _flush_acks(self) -> None:
        if self.pending_acks:
            pipe = self.client.pipeline(transaction=False)
            for i in self.pending_acks:
                pipe.rpush(self.credit_keys[i], 1)
            pipe.execute()
            self.pending_acks.clear()

    def block(self, channel_index: int) -> None:
        self.blocked.add(channel_index)

    def unblock(self, channel_index: int) -> None:
        self.blocked.discard(channel_index)

    def close(self) -> None:
        self._flush_acks()


class RedisChannelFactory:
    def __init__(self, client: redis.Redis, credits: int, cancelled: threading.Event) -> None:
        self.client = client
        self.credits = credits
        self.cancelled = cancelled

    def writer(self, channel: ChannelId) -> RedisChannelWriter:
        return RedisChannelWriter(self.client, channel, self.credits, self.cancelled)

    def gate(self, channels: list[ChannelId]) -> FramedInputGate:
        return FramedInputGate(RedisInputGate(self.client, channels, self.cancelled), len(channels))
