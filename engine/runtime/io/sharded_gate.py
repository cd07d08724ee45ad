"""ShardedInputGate: a task's input channels spread over several data Redis servers, read without busy polling.

Each server holding some of the gate's channels gets its own connection and at most one blocking
read (BLPOP over that server's open channels) in flight at a time. The gate writes the reads without
waiting for them and then waits, in ``select``, for whichever server answers first: an idle gate
costs each server one BLPOP per poll slice, as a single-server gate does, and no thread.

A read answered while the gate is busy elsewhere, or for a channel blocked meanwhile (barrier
alignment), is kept in a per-channel stash and handed out in arrival order once its channel is open:
nothing popped is ever dropped or reordered within a channel. Channels with something in the stash
are left out of the next read, so the stash holds at most a few elements per channel.

Sealing and credits are per channel, exactly as in ``RedisInputGate`` (engine/runtime/io/redis_channels.py):
every element is opened with its channel's sealer and sequence number as it is popped, and each
acknowledged element returns one sealed, cumulatively numbered credit token to its channel's credit
list, on the channel's own server, sent along with that server's next read (never queued behind a read
in flight), and a quiet channel's latest number is announced again (engine/runtime/io/credit.py), so
deleted tokens cannot starve a producer.
A dead server shows up as a ConnectionError from its connection, which fails the task.
"""
from __future__ import annotations

import select
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from millstream.engine.runtime.io.channel import ChannelId, TaskCancelled
from millstream.engine.runtime.io.input_channels import InputChannels

if TYPE_CHECKING:
    from millstream.engine.runtime.io.redis_channels import RedisLink

_POLL_SLICE = 0.1  # seconds a BLPOP waits at most: how often a quiet gate re-checks cancellation


class ShardedInputGate:
    def __init__(
        self,
        links: "dict[int, RedisLink]",
        servers: list[int],
        cids: list[ChannelId],
        cancelled: threading.Event,
        secret: str | bytes | None,
    ) -> None:
        """``links``: server index -> this gate's connection to it; ``servers[i]``: channel i's server."""
        self.links = links
        self.server_of = servers
        self.channels_of: dict[int, list[int]] = {s: [i for i, x in enumerate(servers) if x == s] for s in links}
        self.channels = InputChannels(cids, secret)
        self.cancelled = cancelled
        self.blocked: set[int] = set()
        self.pending_acks: dict[int, list[int]] = {s: [] for s in links}
        self.pending_again: dict[int, set[int]] = {s: set() for s in links}  # channels to announce again
        self.reading: dict[int, bool] = {s: False for s in links}  # a BLPOP in flight on that server
        self.stash: list[deque[bytes]] = [deque() for _ in range(len(cids))]  # opened, not yet handed out
        self.arrived: deque[int] = deque()  # the channel of each stashed element, in arrival order
        self._rotate: dict[int, int] = {s: 0 for s in links}
        self._closing = False

    # -- the InputGate protocol -----------------------------------------------------
    def poll(self, timeout: float) -> tuple[int, bytes] | None:
        if self.cancelled.is_set():
            raise TaskCancelled()
        self._issue()
        got = self._take()
        if got is not None:
            return got
        deadline = time.monotonic() + max(0.01, min(timeout, _POLL_SLICE))
        while True:
            self._wait(deadline - time.monotonic())
            got = self._take()
            if got is not None or time.monotonic() >= deadline:
                return got
            self._issue()  # servers whose read came back empty read again

    def ack(self, channel_index: int) -> None:
        # Deferred: sent with that server's next BLPOP in one write.
        self.pending_acks[self.server_of[channel_index]].append(channel_index)

    def block(self, channel_index: int) -> None:
        self.blocked.add(channel_index)

    def unblock(self, channel_index: int) -> None:
        self.blocked.discard(channel_index)

    def close(self) -> None:
        """Return the credits still owed (after the reads in flight, at most one poll slice), then
        give the connections back. A cancelled task only lets go: its channels are dropped anyway."""
        self._closing = True
        try:
            if not self.cancelled.is_set():
                for s, link in self.links.items():
                    link.read_unread()
                    if self.pending_acks[s]:
                        link.pipeline([self.channels.acknowledge(i) for i in self.pending_acks[s]])
                        self.pending_acks[s].clear()
        finally:
            for link in self.links.values():
                link.close()

    # -- inside -----------------------------------------------------------------------
    def _issue(self) -> None:
        """Every server without a read in flight gets its owed credits, its quiet channels' latest
        credit announced again (then trimmed to that one token), and a new BLPOP over its open
        channels (those neither blocked nor with elements already stashed)."""
        for i in self.channels.quiet(self.blocked):
            self.pending_again[self.server_of[i]].add(i)  # goes with that server's next write
        for s, link in self.links.items():
            if self.reading[s]:
                continue
            commands: list[tuple[Any, ...]] = [self.channels.acknowledge(i) for i in self.pending_acks[s]]
            self.pending_acks[s].clear()
            for i in self.pending_again[s]:
                commands.extend(self.channels.announce_again(i))
            self.pending_again[s].clear()
            handlers: list[Any] = [None] * len(commands)
            open_keys = [self.channels.keys[i] for i in self.channels_of[s] if i not in self.blocked and not self.stash[i]]
            if open_keys:
                # Rotate the key order so BLPOP's first-key preference does not starve a channel.
                r = self._rotate[s] = (self._rotate[s] + 1) % len(open_keys)
                open_keys = open_keys[r:] + open_keys[:r]
                commands.append(("BLPOP", *open_keys, _POLL_SLICE))
                handlers.append(lambda reply, s=s: self._popped(s, reply))
                self.reading[s] = True
            if commands:
                link.send_nowait(commands, handlers)
                if not self.reading[s]:
                    link.read_available()  # credit replies only: read those that are there

    def _wait(self, seconds: float) -> None:
        """Until some server's reply arrives or ``seconds`` pass; read every reply that is there."""
        waiting = [s for s, r in self.reading.items() if r]
        if not waiting:
            time.sleep(max(0.0, seconds))  # every channel blocked or stashed: nothing to read
            return
        ready = [s for s in waiting if self.links[s].conn.can_read(0)]  # replies already buffered
        if not ready and seconds > 0:
            socks = {self.links[s].socket(): s for s in waiting}
            readable, _, _ = select.select(list(socks), [], [], seconds)
            ready = [socks[sock] for sock in readable]
        for s in ready:
            self.links[s].read_available()

    def _popped(self, server: int, reply: Any) -> None:
        self.reading[server] = False
        if not reply or self._closing:
            return
        key, value = reply
        i, payload = self.channels.open(key, value)
        self.stash[i].append(payload)
        self.arrived.append(i)

    def _take(self) -> tuple[int, bytes] | None:
        """The oldest stashed element of an open channel."""
        for pos, i in enumerate(self.arrived):
            if i not in self.blocked:
                del self.arrived[pos]
                return i, self.stash[i].popleft()
        return None
