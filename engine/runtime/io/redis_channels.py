"""Channels over Redis lists, with credit-based flow control.

Data buffers go to ``ms:ch:...`` with RPUSH; the consumer pops them with BLMPOP
over all its unblocked channels at once, taking up to half a channel's credit
in one round trip (BLPOP, one at a time, on a Redis before 7.0); elements taken
ahead wait in the gate, in order, for the task. Consumed buffers return their
credit on ``ms:cr:...``, one token per channel for all the buffers acknowledged
since the last write. A producer starts with N credits and blocks when it has
none, so at most N unread buffers ever sit in Redis per channel, however slow
the consumer. Credit fetches ride along with a push.

Pushes are pipelined, as Flink's network stack writes buffers without waiting:
the producer writes the command and goes on; replies are read later, in order,
when a credit fetch's answer is needed, when many are waiting, or when the
writers close. Only a task that has run out of credit waits for Redis.

A task's channels talk to Redis over connections of their own (``RedisLink``):
only the task's thread uses them, so the pool's per-command checkout, liveness
probe and retry wrapper, which cost more than the round trip itself, are skipped.
A link checks its connection out of the process's pool once and gives it back
when the task ends, however it ends (``RedisChannelFactory.close``), so a
TaskManager runs any number of jobs and restarts on a flat connection count.
A broken connection fails the task, and the restart strategy takes over.

With several data servers (MILLSTREAM_DATA_REDIS_URLS) each channel and its credits live on the
server ``data_servers.shard_of`` picks; writers share one link per server, and a gate whose channels
span servers is a ``ShardedInputGate`` (engine/runtime/io/sharded_gate.py).

Every element is sealed with the cluster secret (engine/security/mac.py), bound to its channel key
(job, attempt, edge, subtask pair) and its sequence number in the channel; the gate opens it before
anything decodes it. An element that does not open (pushed by someone with only the Redis URL,
replayed from another channel or attempt) fails the consuming task with "unauthenticated buffer on
channel X", which the restart strategy handles like any task failure: nothing in it is decoded.

Credit tokens are sealed too, bound to their credit key (job, attempt, channel), and numbered
cumulatively (engine/runtime/io/credit.py): token n says the consumer has taken n + 1 elements, and a
producer counts only what a token that opens adds past the last number counted. A token pushed by
someone with only the Redis URL, or a genuine one copied, adds nothing, so forged credits cannot lift
the bound on unread buffers; tokens deleted from Redis are made good by the next one, and a consumer
announces its latest number again on a channel that has been quiet for a while (RPUSH then LTRIM to
that one token, so an idle channel's credit list stays one element long), so a producer starved by
deleted tokens resumes instead of stalling.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

import redis

from millstream.engine import redis_keys
from millstream.engine.runtime.io import data_servers
from millstream.engine.runtime.io.channel import ChannelId, TaskCancelled
from millstream.engine.runtime.io.credit import CreditLedger
from millstream.engine.runtime.io.frames import FramedInputGate
from millstream.engine.runtime.io.input_channels import InputChannels
from millstream.engine.runtime.io.sharded_gate import ShardedInputGate
from millstream.engine.security.mac import Sealer, Unauthenticated

_POLL_SLICE = 0.1  # seconds; how often a blocked wait re-checks cancellation


#: acks that, while a task works through elements read ahead, are sent without waiting for the next read
_ACKS_AHEAD = 2

_MAX_UNREAD = 64  # replies left unread before the link reads those that have arrived
# ... and before it waits for the others: only a Redis this far behind holds a writer up. Waiting at
# _MAX_UNREAD itself put a round trip (a scheduling delay of the server on a loaded machine) into
# one send in 64, which the latency markers saw as their p99 (engine/runtime/latency_markers.py).
_MAX_UNREAD_WAIT = 1024

ReplyHandler = Callable[[Any], None] | None


class RedisLink:
    """One connection used by one thread: commands written straight to the socket, replies read in order.

    ``send`` does not wait for replies; each gets a handler (or None), run when the reply is read.
    An error reply raises from whichever call reads it, and fails the task.
    """

    def __init__(self, client: redis.Redis) -> None:
        # Checked out once for the task's lifetime; ``close`` returns it (never leave a pool's
        # connection un-returned: the pool counts it against max_connections forever).
        self.pool: Any = client.connection_pool
        self.conn: Any = self.pool.get_connection()
        self.unread: deque[ReplyHandler] = deque()
        self.closed = False

    def call(self, *args: Any) -> Any:
        return self.pipeline([args])[0]

    def pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send and wait for these commands' replies (reading any earlier unread ones first)."""
        conn = self.conn
        try:
            conn.send_packed_command(conn.pack_commands(commands), check_health=False)
            self._read_unread()
            return [conn.read_response() for _ in commands]
        except BaseException:
            # Replies may be left unread: the connection cannot be trusted for the next command.
            conn.disconnect()
            raise

    def send(self, commands: list[tuple[Any, ...]], handlers: list[ReplyHandler]) -> None:
        """Write commands without waiting; ``handlers[i]`` gets command i's reply when it is read."""
        conn = self.conn
        try:
            conn.send_packed_command(conn.pack_commands(commands), check_health=False)
            self.unread.extend(handlers)
            if len(self.unread) > _MAX_UNREAD:
                self._read_arrived()
                if len(self.unread) > _MAX_UNREAD_WAIT:
                    self._read_unread()
        except BaseException:
            conn.disconnect()
            raise

    def read_unread(self) -> None:
        """Wait for every reply still unread, so everything sent so far has been done by Redis."""
        try:
            self._read_unread()
        except BaseException:
            self.conn.disconnect()
            raise

    def send_nowait(self, commands: list[tuple[Any, ...]], handlers: list[ReplyHandler]) -> None:
        """As ``send``, but never reads replies here: one of them may be a blocking read's."""
        conn = self.conn
        try:
            conn.send_packed_command(conn.pack_commands(commands), check_health=False)
            self.unread.extend(handlers)
        except BaseException:
            conn.disconnect()
            raise

    def read_available(self) -> None:
        """Read the replies that have arrived, without waiting for the others. A closed connection
        (the server died) raises ConnectionError here."""
        try:
            self._read_arrived()
        except BaseException:
            self.conn.disconnect()
            raise

    def _read_arrived(self) -> None:
        conn, unread = self.conn, self.unread
        while unread and conn.can_read(0):
            reply = conn.read_response()
            handler = unread.popleft()
            if handler is not None:
                handler(reply)

    def socket(self) -> Any:
        """The connection's socket, to wait on several links at once (select)."""
        return self.conn._sock  # redis-py has no public accessor; None once disconnected

    def _read_unread(self) -> None:
        unread, read = self.unread, self.conn.read_response
        while unread:
            reply = read()
            handler = unread.popleft()
            if handler is not None:
                handler(reply)

    def close(self) -> None:
        """Give the connection back to the pool (at most once). One with replies still unread could
        hand them to its next user, so it is disconnected first (the pool reconnects it on reuse)."""
        if self.closed:
            return
        self.closed = True
        if self.unread:
            self.unread.clear()
            self.conn.disconnect()
        self.pool.release(self.conn)


class RedisChannelWriter:
    def __init__(
        self, link: RedisLink, cid: ChannelId, credits: int, cancelled: threading.Event, secret: str | bytes | None
    ) -> None:
        self.link = link
        self.data_key = redis_keys.channel(cid.job_id, cid.attempt, cid.edge, cid.src, cid.dst)
        self.sealer = Sealer(secret, "buffer", self.data_key)
        self.seq = 0  # elements sent so far: the next one's sequence number, inside its MAC
        self.credit_key = redis_keys.credit(cid.job_id, cid.attempt, cid.edge, cid.src, cid.dst)
        self.credit_sealer = Sealer(secret, "credit", self.credit_key)
        self.ledger = CreditLedger(credits)  # what the consumer's numbered tokens have granted so far
        self.initial = credits
        self.credits = credits
        self.cancelled = cancelled
        self.blocked_since: float | None = None  # set while waiting for credit, read by the metrics sampler
        self.fetching = False  # a credit fetch is in flight
        # Answers to the blocking credit polls of a producer out of credit: how a caller tells "blocked,
        # having looked for credit and found none" from "not scheduled yet".
        self.credit_polls = 0

    def send(self, payload: bytes, is_data: bool) -> float:
        blocked = 0.0
        if is_data and self.credits <= 0 and self.fetching:
            self.link.read_unread()  # the credit fetch in flight may bring enough
        if is_data and self.credits <= 0:
            t0 = self.blocked_since = time.monotonic()
            while self.credits <= 0:
                if self.cancelled.is_set():
                    self.blocked_since = None
                    raise TaskCancelled()
                got = self.link.call("BLPOP", self.credit_key, _POLL_SLICE)
                if got:
                    self.credits += self._count((got[1],))
                    more = self.link.call("LPOP", self.credit_key, self.initial)
                    self.credits += self._count(more or ())
                self.credit_polls += 1
            self.blocked_since = None
            blocked = time.monotonic() - t0
        if is_data:
            self.credits -= 1
        payload = self.sealer.seal(payload, self.seq)
        self.seq += 1
        if is_data and self.credits < self.initial // 2 and not self.fetching:
            # Piggyback a non-blocking credit fetch on the push; its answer is counted when read.
            self.fetching = True
            self.link.send(
                [("RPUSH", self.data_key, payload), ("LPOP", self.credit_key, self.initial)], [None, self._fetched]
            )
        else:
            self.link.send([("RPUSH", self.data_key, payload)], [None])
        return blocked

    def _fetched(self, tokens: list[bytes] | None) -> None:
        self.fetching = False
        self.credits += self._count(tokens or ())

    def _count(self, tokens: "list[bytes] | tuple[bytes, ...]") -> int:
        """The credit that ``tokens`` add: only genuine ones (sealed for this channel) count, and only
        by what their cumulative number adds past the last counted (a gap was a deleted token)."""
        n = 0
        for token in tokens:
            try:
                number = int.from_bytes(self.credit_sealer.open(token), "big")
            except Unauthenticated:
                continue  # forged: never a credit
            n += self.ledger.count(number)
        return n

    def close(self) -> None:
        """Wait until Redis has taken every buffer sent (before the task may report it finished)."""
        self.link.read_unread()


class RedisInputGate:
    def __init__(
        self,
        link: RedisLink,
        cids: list[ChannelId],
        cancelled: threading.Event,
        secret: str | bytes | None,
        read_ahead: int = 1,
    ) -> None:
        self.link = link
        self.channels = InputChannels(cids, secret)
        self.blocked: set[int] = set()
        self.cancelled = cancelled
        self.pending_acks: list[int] = []
        self._rotate = 0
        # Elements taken from a channel ahead of the task (still sealed, in order), served before the next read.
        self.read_ahead = max(1, read_ahead)
        self.ahead: list[deque[bytes]] = [deque() for _ in cids]
        self.ahead_channels: set[int] = set()
        self._multi_pop = self.read_ahead > 1  # BLMPOP (Redis >= 7); falls back to BLPOP where refused

    def poll(self, timeout: float) -> tuple[int, bytes] | None:
        if self.cancelled.is_set():
            raise TaskCancelled()
        for i in self.ahead_channels:
            if i not in self.blocked:
                return self._take_ahead(i)
        again = self.channels.quiet(self.blocked)
        if again:
            self._announce_again(again)
        open_keys = [k for i, k in enumerate(self.channels.keys) if i not in self.blocked]
        if not open_keys:
            self._flush_acks()
            time.sleep(min(timeout, _POLL_SLICE))
            return None
        # Rotate the key order so the blocking pop's first-key preference does not starve a channel.
        self._rotate = (self._rotate + 1) % len(open_keys)
        open_keys = open_keys[self._rotate :] + open_keys[: self._rotate]
        wait = max(0.01, min(timeout, _POLL_SLICE))
        # Deferred credits go back in the same round trip as the next read.
        commands = self._owed()
        if self._multi_pop:
            # Up to read_ahead elements of the first channel that has any, in one round trip: under
            # load a task takes several buffers per trip instead of one.
            commands.append(("BLMPOP", wait, len(open_keys), *open_keys, "LEFT", "COUNT", self.read_ahead))
        else:
            commands.append(("BLPOP", *open_keys, wait))
        try:
            got = self.link.pipeline(commands)[-1]
        except redis.ResponseError as e:
            if not self._multi_pop or "unknown command" not in str(e).lower():
                raise
            self._multi_pop = False  # a Redis before 7.0: the credits before it went through; read again
            return None
        if not got:
            return None
        if not self._multi_pop:
            key, value = got
            return self.channels.open(key, value)
        key, values = got
        first = self.channels.open(key, values[0])
        if len(values) > 1:
            # Opened one by one as the task takes them, so an element that does not open fails the
            # task where it stands in the channel, after everything genuine before it.
            i = first[0]
            self.ahead[i].extend(values[1:])
            self.ahead_channels.add(i)
        return first

    def _take_ahead(self, i: int) -> tuple[int, bytes]:
        q = self.ahead[i]
        element = self.channels.open(self.channels.keys[i], q.popleft())
        if not q:
            self.ahead_channels.discard(i)
        if len(self.pending_acks) >= _ACKS_AHEAD:
            # The task is working through elements taken ahead: its producers get their credit back
            # without waiting for the next read (a write, no round trip).
            commands = self._owed()
            self.link.send(commands, [None] * len(commands))
        return element

    def ack(self, channel_index: int) -> None:
        # Deferred: sent with the next BLPOP in one round trip.
        self.pending_acks.append(channel_index)

    def _owed(self) -> list[tuple[Any, ...]]:
        """The credit commands of the acks deferred so far (and forgets them: they are being sent):
        one token per channel, its latest number holding the credit of the elements before it."""
        commands = self.channels.acknowledge_all(self.pending_acks)
        self.pending_acks.clear()
        return commands

    def _announce_again(self, due: list[int]) -> None:
        """Push each quiet channel's latest token again (after any deferred acks), trimming its credit
        list to that token."""
        commands = self._owed()
        for i in due:
            commands.extend(self.channels.announce_again(i))
        self.link.pipeline(commands)

    def _flush_acks(self) -> None:
        if self.pending_acks:
            self.link.pipeline(self._owed())

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
    """One task's channels. Its record writers share one link per data server and its input gate
    has links of its own, because the writers still send END_OF_PARTITION after the gate is closed.

    ``client`` is one data server, or a list of them (MILLSTREAM_DATA_REDIS_URLS): each channel, with
    its credits, lives on the server ``data_servers.shard_of`` picks for its key. A gate whose channels
    all live on one server reads them as before; one spread over several reads each server with a
    blocking read of its own (``ShardedInputGate``)."""

    def __init__(
        self,
        client: "redis.Redis | list[redis.Redis]",
        credits: int,
        cancelled: threading.Event,
        secret: str | bytes | None = None,
    ) -> None:
        self.clients = list(client) if isinstance(client, (list, tuple)) else [client]
        if not self.clients:
            raise ValueError("a channel factory needs at least one data server")
        self.credits = credits
        self.cancelled = cancelled
        self.secret = secret  # seals every element; without one, making a writer or gate fails the task
        self._writer_links: dict[int, RedisLink] = {}
        self._links: list[RedisLink] = []

    def _link(self, server: int) -> RedisLink:
        link = RedisLink(self.clients[server])
        self._links.append(link)
        return link

    def server_of(self, channel: ChannelId) -> int:
        return data_servers.shard_of(channel, len(self.clients))

    def writer(self, channel: ChannelId) -> RedisChannelWriter:
        server = self.server_of(channel)
        link = self._writer_links.get(server)
        if link is None:
            link = self._writer_links[server] = self._link(server)
        return RedisChannelWriter(link, channel, self.credits, self.cancelled, self.secret)

    def gate(self, channels: list[ChannelId]) -> FramedInputGate:
        servers = [self.server_of(c) for c in channels]
        used = sorted(set(servers))
        if len(used) <= 1:
            # A read takes up to half a channel's credit ahead: the other half keeps its producer writing.
            inner: Any = RedisInputGate(
                self._link(used[0] if used else 0), channels, self.cancelled, self.secret, read_ahead=self.credits // 2
            )
        else:
            links = {s: self._link(s) for s in used}
            inner = ShardedInputGate(links, servers, channels, self.cancelled, self.secret)
        return FramedInputGate(inner, len(channels))

    def close(self) -> None:
        """The task ended (finished, failed or cancelled): every connection goes back to the pool."""
        links, self._links, self._writer_links = self._links, [], {}
        for link in links:
            link.close()
