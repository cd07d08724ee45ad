"""In-memory channels for the local mini-cluster, with the same credit semantics as Redis."""
from __future__ import annotations

import threading
import time
from collections import deque

from millstream.engine.runtime.io.channel import ChannelId, TaskCancelled
from millstream.engine.runtime.io.frames import FramedInputGate


class _LocalChannel:
    def __init__(self, credits: int) -> None:
        self.buffers: deque[bytes] = deque()
        self.credits = credits


class LocalChannelRegistry:
    """All channels of one mini-cluster; one condition variable wakes every waiter."""

    def __init__(self, credits: int = 8) -> None:
        self.credits = credits
        self.cond = threading.Condition()
        self.channels: dict[ChannelId, _LocalChannel] = {}

    def get(self, cid: ChannelId) -> _LocalChannel:
        ch = self.channels.get(cid)
        if ch is None:
            ch = self.channels[cid] = _LocalChannel(self.credits)
        return ch

    def factory(self, cancelled: threading.Event) -> "LocalChannelFactory":
        return LocalChannelFactory(self, cancelled)


class LocalChannelWriter:
    def __init__(self, reg: LocalChannelRegistry, cid: ChannelId, cancelled: threading.Event) -> None:
        self.reg = reg
        self.cid = cid
        self.cancelled = cancelled
        self.blocked_since: float | None = None  # set while waiting for credit, read by the metrics sampler
        with reg.cond:
            self.ch = reg.get(cid)

    def send(self, payload: bytes, is_data: bool) -> float:
        blocked = 0.0
        with self.reg.cond:
            if is_data and self.ch.credits <= 0:
                t0 = self.blocked_since = time.monotonic()
                while self.ch.credits <= 0:
                    if self.cancelled.is_set():
                        self.blocked_since = None
                        raise TaskCancelled()
                    self.reg.cond.wait(0.05)
                self.blocked_since = None
                blocked = time.monotonic() - t0
            if is_data:
                self.ch.credits -= 1
            self.ch.buffers.append(payload)
            self.reg.cond.notify_all()
        return blocked

    def close(self) -> None:
        pass


class LocalInputGate:
    def __init__(self, reg: LocalChannelRegistry, cids: list[ChannelId], cancelled: threading.Event) -> None:
        self.reg = reg
        self.cancelled = cancelled
        with reg.cond:
            self.channels = [reg.get(c) for c in cids]
        self.blocked: set[int] = set()
        self._next = 0

    def poll(self, timeout: float) -> tuple[int, bytes] | None:
        deadline = time.monotonic() + timeout
        n = len(self.channels)
        with self.reg.cond:
            while True:
                for k in range(n):
                    i = (self._next + k) % n
                    if i not in self.blocked and self.channels[i].buffers:
                        self._next = (i + 1) % n
                        return i, self.channels[i].buffers.popleft()
                if self.cancelled.is_set():
                    raise TaskCancelled()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self.reg.cond.wait(min(remaining, 0.05))

    def ack(self, channel_index: int) -> None:
        with self.reg.cond:
            self.channels[channel_index].credits += 1
            self.reg.cond.notify_all()

    def block(self, channel_index: int) -> None:
        self.blocked.add(channel_index)

    def unblock(self, channel_index: int) -> None:
        self.blocked.discard(channel_index)

    def close(self) -> None:
        pass


class LocalChannelFactory:
    def __init__(self, reg: LocalChannelRegistry, cancelled: threading.Event) -> None:
        self.reg = reg
        self.cancelled = cancelled

    def writer(self, channel: ChannelId) -> LocalChannelWriter:
        return LocalChannelWriter(self.reg, channel, self.cancelled)

    def gate(self, channels: list[ChannelId]) -> FramedInputGate:
        return FramedInputGate(LocalInputGate(self.reg, channels, self.cancelled), len(channels))
