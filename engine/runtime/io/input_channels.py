"""The consumer's per-channel bookkeeping that every Redis input gate shares: each channel's key and
the sealer that authenticates its buffers in sequence, and its credit key, sealer and numbered
tokens (engine/runtime/io/credit.py says what a token means).

The gates differ in how they wait (one BLPOP over one server, or one in flight per server); what a
channel is and how its elements and credits are sealed is the same for both, so it lives here once.
"""
from __future__ import annotations

import time
from typing import Any

from millstream.engine import redis_keys
from millstream.engine.runtime.io.channel import ChannelId, UnauthenticatedBuffer
from millstream.engine.runtime.io.credit import CreditAnnouncer
from millstream.engine.security.mac import Sealer, Unauthenticated


class InputChannels:
    """The channels one gate reads, by index (the order of the ``cids`` it was built with)."""

    def __init__(self, cids: list[ChannelId], secret: str | bytes | None) -> None:
        self.keys = [redis_keys.channel(c.job_id, c.attempt, c.edge, c.src, c.dst) for c in cids]
        self.sealers = [Sealer(secret, "buffer", k) for k in self.keys]
        self.seqs = [0] * len(self.keys)  # the sequence number each channel's next element must carry
        self.credit_keys = [redis_keys.credit(c.job_id, c.attempt, c.edge, c.src, c.dst) for c in cids]
        self.credit_sealers = [Sealer(secret, "credit", k) for k in self.credit_keys]
        # the number of each channel's next credit token, and when a quiet one is announced again
        self.announcer = CreditAnnouncer(len(cids), time.monotonic())
        self.index = {k.encode(): i for i, k in enumerate(self.keys)}

    def __len__(self) -> int:
        return len(self.keys)

    def open(self, key: bytes | str, value: bytes) -> tuple[int, bytes]:
        """(channel index, payload) of an element BLPOP returned from ``key``; a buffer not sealed
        for that channel at its next sequence number fails the task before anything is decoded."""
        i = self.index[key if isinstance(key, bytes) else key.encode()]
        try:
            payload = self.sealers[i].open(value, self.seqs[i])
        except Unauthenticated as e:
            raise UnauthenticatedBuffer(f"unauthenticated buffer on channel {self.keys[i]}: {e}") from None
        self.seqs[i] += 1
        return i, payload

    def acknowledge(self, i: int) -> tuple[Any, ...]:
        """The command that gives channel ``i``'s producer credit for one more element taken."""
        number = self.announcer.acknowledge(i)
        return ("RPUSH", self.credit_keys[i], self._token(i, number))

    def acknowledge_all(self, taken: list[int]) -> list[tuple[Any, ...]]:
        """The commands that give credit for every element in ``taken`` (channel indexes, one per
        element): one token per channel, carrying its latest number, which holds the credit of all
        the elements before it (tokens are cumulative), so a batch costs one write and one seal."""
        latest: dict[int, int] = {}
        for i in taken:
            latest[i] = self.announcer.acknowledge(i)
        return [("RPUSH", self.credit_keys[i], self._token(i, number)) for i, number in latest.items()]

    def announce_again(self, i: int) -> list[tuple[Any, ...]]:
        """The commands that announce channel ``i``'s latest number again and trim its credit list to
        that token: the latest number, past any acks queued before it, holds all their credit."""
        latest = self.announcer.taken[i] - 1
        return [("RPUSH", self.credit_keys[i], self._token(i, latest)), ("LTRIM", self.credit_keys[i], -1, -1)]

    def quiet(self, blocked: set[int]) -> list[int]:
        """The channels due to have their credit announced again (see CreditAnnouncer.due)."""
        return [i for i, _ in self.announcer.due(time.monotonic(), blocked, self.seqs)]

    def _token(self, i: int, number: int) -> bytes:
        return self.credit_sealers[i].seal(number.to_bytes(8, "big"))
