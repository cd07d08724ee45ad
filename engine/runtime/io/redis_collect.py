"""execute_and_collect's results in Redis: the collect sink appends, the REST results route reads.

One list per job holds the entries (engine/runtime/collect.py) the client has not read yet, and a
hash next to it counts how many it has read (``acked``: the list's first entry is at that offset). A
client that asks for offset ``n`` acknowledges every entry before ``n``, which is then trimmed.

The client also says which record positions it holds (an ``Ack``: attempt and position), which the
JobManager seals into the same hash (field ``ack``); the collect sink reads it to forget the records
it keeps for a restore, and waits for it when it keeps as many as it may (``MAX_KEPT_BYTES``), so a
job whose client reads nothing stays within about that much Redis memory (backpressure spreads from
the sink up to the sources, as from any slow consumer). An ack written by anyone else does not open
and is ignored: forging one cannot make a sink forget records.

Every entry is sealed with the cluster secret for its job's list (engine/security/mac.py) and opened
by the JobManager before it is handed to a client: an entry pushed by someone with only the Redis
URL (a pickle extension ``millstream run`` would decode) is refused with ``UnauthenticatedResult``,
which fails that client's collect with a clear error; nothing in it is decoded anywhere.

An entry is also bound to its writer and its place in that writer's output: it goes to Redis as
``writer id (8 bytes) | index (8 bytes) | envelope``, the MAC covering both, and the JobManager's
``CollectPositions`` of the job accepts each (writer, index) at one list position only. A genuine
entry copied and pushed again (a START that would make the client drop pending records, RECORDS the
client would hand out twice) lands at a new position and is left out (logged; its offset still
counts, as the route's ``next-offset`` says), so the client goes on; reading the same position again
(a retried fetch) is fine. Before each batch goes to a client, the JobManager seals what it knows
into the hash (field ``marks``: the offset read up to, each writer's highest index, the positions
read past the client's offset), so positions made afresh (a JobManager that restarted, or a job it
no longer remembers) know every entry read before, even one acknowledged and trimmed from the list,
and a copy across the restart is left out as well. Marks covering less than the client's offset,
forged, or missing once entries were acknowledged, can only come from someone writing to Redis (an
older copy put back lowers the bar): that client's collect fails with ``UnauthenticatedResult``.
Those marks are only a cache: anyone with the Redis URL can delete the hash, and a Redis restart
empties it. The authority on each writer's highest index is the JobManager's SQL job store
(``CollectMarkStore``; engine/jobmanager/stream_marks.py), told before each batch goes to a client
and asked once per writer new positions meet, so a copy is left out after any restart or deletion.
Entries deleted from the list show at the client as a gap in record positions (see
collect_result_buffer.py), which fails the collect clearly.
"""
from __future__ import annotations

import logging
import os
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Protocol

import msgpack
import redis

from millstream.engine import redis_keys
from millstream.engine.runtime.collect import START, Ack, CollectEntry
from millstream.engine.runtime.io.channel import TaskCancelled
from millstream.engine.runtime.io.serialization import MsgpackSerializer
from millstream.engine.security.mac import Sealer, Unauthenticated

#: entries per fetch
FETCH_ENTRIES = 64
#: how long the results of an ended job stay for a client that has not read them all
ENDED_TTL_S = 3600

#: writers whose highest index the JobManager keeps in memory (and in the sealed marks) per job. A bound
#: on memory only: with a durable record (the JobManager's SQL job store) a writer forgotten here is
#: looked up there, so a copy of its entries is still left out.
CACHED_WRITERS = 1000

_WAIT_S = 0.02  # between two looks at the client's acknowledgement while the sink waits for it

# Acknowledge entries before ARGV[1] (trimming them), then return up to ARGV[2] entries from there.
# Returns {0, entries} or {-1, acked} (offset already acknowledged) or {-2, acked + length} (beyond)
# or {-3, offset} (ARGV[3] = '1': the job ended, and its unread results are gone with a Redis restart)
# or {-4, first entry} (an offset past 0 on a list no client read yet: ARGV[4] = '1' rebases it).
_FETCH = """
local offset = tonumber(ARGV[1])
local acked_field = redis.call('HGET', KEYS[2], 'acked')
local acked = tonumber(acked_field or '0')
if not acked_field and offset > 0 then
  -- The first fetch (offset 0) creates the field, so one past 0 that finds it missing either comes
  -- from a client whose list a Redis restart lost, or is bogus (no client read this list yet).
  if ARGV[3] == '1' then
    return {-3, offset}  -- the job ended: nothing writes its results again; they are lost
  end
  if ARGV[4] ~= '1' then
    return {-4, redis.call('LINDEX', KEYS[1], 0) or ''}  -- the caller looks at the first entry
  end
  -- A failover's list: its entries (the new attempt's START onward) continue from the offset.
  redis.call('HSET', KEYS[2], 'acked', offset)
  acked = offset
elseif not acked_field then
  redis.call('HSET', KEYS[2], 'acked', 0)
end
local len = redis.call('LLEN', KEYS[1])
if offset < acked then return {-1, acked} end
if offset > acked + len then return {-2, acked + len} end
local drop = offset - acked
if drop > 0 then
  redis.call('LTRIM', KEYS[1], drop, -1)
  redis.call('HINCRBY', KEYS[2], 'acked', drop)
end
return {0, redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[2]) - 1)}
"""


class ResultOffsetError(ValueError):
    """A client asked for an offset it acknowledged already, or one past the results written."""


class UnauthenticatedResult(ResultOffsetError):
    """A result entry not sealed by this cluster for this job (answered with 400, never decoded)."""


log = logging.getLogger(__name__)

_HEAD = struct.Struct(">8sQ")  # writer id, index of the entry among that writer's


class CollectMarkStore(Protocol):
    """The durable record of each writer's highest index read for one job (the JobManager's SQL job
    store): what no one writing to Redis can reset, unlike the marks in the job's collect hash."""

    def highest(self, writer: bytes) -> int:
        """The writer's highest index read; -1 for a writer none of whose entries was read."""

    def save(self, highs: Mapping[bytes, int]) -> None:
        """Raise the writers' highest indexes read to ``highs``."""


class CollectPositions:
    """The JobManager's memory of one job's result list: which list position holds each writer's entry.

    Pure bookkeeping. ``accept`` says False for an entry whose index is not after its writer's last
    one, unless it is the entry read at that same position before (a retried fetch): a copy, which
    the caller leaves out. ``forget_before`` drops what the client acknowledged. ``primed``: the
    entries the list held before the first offset asked for were taken in (see fetch_results).
    ``durable``: the authority on each writer's highest index, asked once per writer this has not
    seen (Redis's marks are only a cache: a Redis restart or a deleted key empties them), and told
    every index accepted (``save_durable``) before the entries go to a client."""

    def __init__(self, durable: CollectMarkStore | None = None) -> None:
        self.lock = threading.Lock()  # two clients of one job may fetch at once
        self.durable = durable
        self._at: dict[int, tuple[bytes, int]] = {}  # list position -> (writer, index) accepted there
        # writer -> highest index accepted, least recently advanced first (so the cap drops the stalest)
        self._last: dict[bytes, int] = {}
        self._checked: set[bytes] = set()  # writers of _last whose durable mark was taken in
        self._unsaved: dict[bytes, int] = {}  # writers advanced since the durable record was last told
        self.primed = False
        self.copies = 0  # copied entries left out, for the log and tests
        self.stored_upto = -1  # the offset the marks last stored in Redis cover (see _store_marks)

    def accept(self, position: int, writer: bytes, index: int) -> bool:
        if self._at.get(position) == (writer, index):
            if self.durable is not None and index > self._unsaved.get(writer, -1):
                # Read again after a restart that came between the marks and the durable record: the
                # record is told now, before the entry goes to a client (never lowered, so harmless).
                self._unsaved[writer] = index
            return True  # the same entry read again
        # Another entry at a position read before is no replay: Redis restarted and the list continues
        # from the client's offset with the new attempt's entries. A copy is an index seen before.
        # A restored attempt's sink is a new writer (a fresh random id) numbered from 0, so its
        # entries are never taken for copies of the failed attempt's.
        if index <= self._highest(writer):
            return False
        self._at[position] = (writer, index)
        self._last.pop(writer, None)  # re-inserted last: the dict stays ordered by recency
        self._last[writer] = index
        if self.durable is not None:
            self._unsaved[writer] = index
        self._evict()
        return True

    def _highest(self, writer: bytes) -> int:
        last = self._last.get(writer, -1)
        if self.durable is not None and writer not in self._checked:
            # Once per writer: what Redis's marks said (or nothing, after a restart or a deleted key)
            # is raised to what SQL knows; the writer then stays in _last with _checked.
            last = max(last, self.durable.highest(writer))
            self._last[writer] = last
            self._checked.add(writer)
            self._evict()
        return last

    def _evict(self) -> None:
        while len(self._last) > CACHED_WRITERS:
            # The writer whose entries stopped coming longest ago is forgotten here (the marks are
            # rewritten on every read). Without a durable record a copy of its entries would then be
            # accepted; with one it is looked up again. A writer is one attempt's sink instance.
            stalest = next(iter(self._last))
            del self._last[stalest]
            self._checked.discard(stalest)

    def save_durable(self) -> None:
        """Tell the durable record every index accepted since the last call (before the entries read
        go to a client, so a copy of any entry a client got is known across any restart)."""
        if self.durable is not None and self._unsaved:
            self.durable.save(dict(self._unsaved))
            self._unsaved.clear()

    def marks(self, upto: int) -> bytes:
        """What this knows, to be sealed into the job's collect hash: every entry before ``upto`` was
        read (so taken in here), the writers' highest indexes, and the positions read past the
        client's offset (a client that did not get its batch asks for them again)."""
        last = [[w, i] for w, i in self._last.items() if i >= 0]
        return msgpack.packb([upto, last, [[p, w, i] for p, (w, i) in self._at.items()]])

    def load_marks(self, raw: bytes) -> int:
        """Take in marks written by ``marks``; returns the offset they cover."""
        upto, last, at = msgpack.unpackb(raw, raw=True)
        for w, i in last:
            self._last[bytes(w)] = max(int(i), self._last.get(bytes(w), -1))
        for p, w, i in at:
            self._at[int(p)] = (bytes(w), int(i))
        self._evict()
        return int(upto)

    def forget_before(self, position: int) -> None:
        for p in [p for p in self._at if p < position]:
            del self._at[p]


class RedisCollectGateway:
    """The collect sink's gateway on a TaskManager (and the Spark driver's, ungated)."""

    replays = True  # a Redis restart loses the list: the sink keeps what the client has not acknowledged

    def __init__(
        self,
        client: redis.Redis,
        job_id: str,
        gated: bool,
        cancelled: threading.Event | None = None,
        secret: str | bytes | None = None,
    ) -> None:
        self.client = client
        self.gated = gated
        self.cancelled = cancelled
        self.key = redis_keys.collect(job_id)
        self.meta = redis_keys.collect_meta(job_id)
        self.serializer = MsgpackSerializer()
        self.sealer = Sealer(secret, "collect", self.key)  # no secret: the sink fails at once, clearly
        self.ack_sealer = ack_sealer(secret, job_id)
        self.writer = os.urandom(8)  # this sink instance's entries are numbered from 0 under this id
        self.index = 0
        # Looks at the acknowledgement while waiting: how a caller tells "still waiting, having read
        # what is there" from "not scheduled yet" (a wait that ignores a forged ack is one that looked).
        self.looks = 0

    def acknowledged(self, attempt: int) -> int:
        ack = open_ack(self.ack_sealer, self.client.hget(self.meta, "ack"))
        return ack.position if ack is not None and ack.attempt == attempt else 0

    def await_acknowledged(self, attempt: int, position: int) -> int:
        while True:
            acked = self.acknowledged(attempt)
            self.looks += 1
            if acked >= position:
                return acked
            if self.cancelled is not None and self.cancelled.is_set():
                raise TaskCancelled()
            time.sleep(_WAIT_S)

    def publish(self, entries: list[CollectEntry]) -> None:
        payloads = []
        for e in entries:
            head = _HEAD.pack(self.writer, self.index)
            payloads.append(head + self.sealer.seal(e.encode(self.serializer), self.index, head))
            self.index += 1
        self.client.rpush(self.key, *payloads)


def ack_sealer(secret: str | bytes | None, job_id: str) -> Sealer:
    return Sealer(secret, "collect-ack", redis_keys.collect_meta(job_id))


def open_ack(sealer: Sealer, raw: bytes | None) -> Ack | None:
    """The client's acknowledgement the JobManager sealed, or None (none yet, or not sealed by it)."""
    if raw is None:
        return None
    try:
        return Ack.decode(sealer.open(raw))
    except (Unauthenticated, ValueError, TypeError):  # msgpack's decoding errors are ValueErrors
        return None


def record_ack(client: Any, job_id: str, ack: Ack, secret: str | bytes | None) -> None:
    """Seal and store the client's acknowledgement for the job's collect sink."""
    client.hset(redis_keys.collect_meta(job_id), "ack", ack_sealer(secret, job_id).seal(ack.encode()))


@dataclass
class ResultBatch:
    """A fetch's entries (opened; copies left out) and the offset the client asks from next: the
    entries read, copies included, so leaving a copy out moves no later entry's offset."""

    entries: list[bytes]
    next_offset: int


def fetch_results(
    client: Any,
    job_id: str,
    offset: int,
    max_entries: int = FETCH_ENTRIES,
    secret: str | bytes | None = None,
    ended: bool = False,
    positions: CollectPositions | None = None,
) -> list[bytes]:
    """fetch_batch's entries alone."""
    return fetch_batch(client, job_id, offset, max_entries, secret, ended, positions).entries


def fetch_batch(
    client: Any,
    job_id: str,
    offset: int,
    max_entries: int = FETCH_ENTRIES,
    secret: str | bytes | None = None,
    ended: bool = False,
    positions: CollectPositions | None = None,
) -> ResultBatch:
    """Acknowledge the job's entries before ``offset`` and return the next ones (encoded). After a
    Redis restart lost the list, a fresh one (a failover's) continues at ``offset``; if the job has
    ``ended``, nothing will write it again and the loss is an error. ``positions``: the job's
    CollectPositions, which leave a replayed entry out."""
    if positions is None:
        return _fetch(client, job_id, offset, max_entries, secret, ended, None)
    with positions.lock:  # priming, trimming, reading and storing the marks as one, against another client's fetch
        if not positions.primed and secret is not None:
            _prime(client, job_id, offset, secret, positions)
            positions.primed = True  # only once primed: a refused prime is refused again on the next fetch
        batch = _fetch(client, job_id, offset, max_entries, secret, ended, positions)
        if secret is not None and batch.next_offset != positions.stored_upto:
            # Before the batch goes to the client: whatever offset a client holds, the marks in Redis
            # cover it, so marks older than a client's offset can only have been put back by someone.
            _store_marks(client, job_id, secret, positions, batch.next_offset)
        # After the marks: a JobManager killed between the two leaves the marks ahead of SQL, and the
        # client's retry meets its entries at the positions the marks record. The other way round, SQL
        # would know the writers' indexes without their positions, and the retry would take the batch
        # the client never got for copies and leave it out (a gap: the client's collect fails).
        positions.save_durable()
        return batch


def marks_sealer(secret: str | bytes | None, job_id: str) -> Sealer:
    return Sealer(secret, "collect-marks", redis_keys.collect(job_id))


def _store_marks(client: Any, job_id: str, secret: str | bytes, positions: CollectPositions, upto: int) -> None:
    raw = marks_sealer(secret, job_id).seal(positions.marks(upto))
    client.hset(redis_keys.collect_meta(job_id), "marks", raw)
    positions.stored_upto = upto


def _prime(client: Any, job_id: str, offset: int, secret: str | bytes, positions: CollectPositions) -> None:
    """New positions (a JobManager that restarted, or a job it no longer remembers) asked for entries
    from ``offset``: take in the marks the JobManager sealed into the job's collect hash at its last
    read (field ``marks``), so a copy of any entry read before, acknowledged and trimmed or not, is
    known. Marks covering less than ``offset`` are refused: every batch a client got was covered by
    marks stored before it was sent, so such marks are an older copy put back (to lower the bar) or
    forged. Bound to the client's offset, not to the hash's ``acked`` count: that count is not sealed,
    and someone rolling the marks back could roll it back with them."""
    acked, raw = client.hmget(redis_keys.collect_meta(job_id), "acked", "marks")
    if raw is not None:
        try:
            payload = marks_sealer(secret, job_id).open(raw)
            upto = int(msgpack.unpackb(payload, raw=True)[0])
        except (Unauthenticated, ValueError, TypeError, IndexError):  # msgpack's decoding errors are ValueErrors
            upto = -1
        if upto >= offset:
            positions.stored_upto = positions.load_marks(payload)
            return
    if offset == 0 or acked is None:
        # Nothing was read before offset 0; with no acknowledged count Redis lost the job's hash (and
        # list) with a restart, which _FETCH tells from a bogus offset.
        return
    log.warning("refused job %s's result marks at offset %d: missing, not sealed by this cluster, or older", job_id, offset)
    raise UnauthenticatedResult(
        f"job {job_id}'s record of the result entries read before offset {offset} is missing, not sealed by this "
        f"cluster or older than that offset (put back from an earlier copy?): copied entries could not be told apart"
    )


def _fetch(
    client: Any,
    job_id: str,
    offset: int,
    max_entries: int,
    secret: str | bytes | None,
    ended: bool,
    positions: CollectPositions | None,
) -> ResultBatch:
    keys = (redis_keys.collect(job_id), redis_keys.collect_meta(job_id))
    sealer = Sealer(secret, "collect", redis_keys.collect(job_id))
    status, value = client.eval(_FETCH, 2, *keys, offset, max_entries, int(ended), 0)
    if status == -4:
        # An offset past 0 on a list no client has read: Redis restarted and the job failed over
        # (the list starts with a new attempt's START), or the offset is bogus. Decided on the
        # first entry's clear header, so neither a JobManager restart nor a stray request can
        # move a list's offsets.
        if not value:
            return ResultBatch([], offset)  # nothing written since: the failover's attempt has not started yet
        if not _starts_a_failover(sealer, value):
            raise ResultOffsetError(f"offset {offset} is past the result entries written so far")
        status, value = client.eval(_FETCH, 2, *keys, offset, max_entries, int(ended), 1)
    if status == -1:
        raise ResultOffsetError(f"results before offset {value} were acknowledged and dropped; offset {offset} is gone")
    if status == -2:
        raise ResultOffsetError(f"offset {offset} is past the {value} result entries written so far")
    if status == -3:
        raise ResultOffsetError(
            f"job {job_id} ended and its results from offset {offset} on are gone (Redis restarted, or "
            f"they expired {ENDED_TTL_S} s after the job ended)"
        )
    if positions is not None:
        positions.forget_before(offset)
    return ResultBatch(_open_entries(sealer, job_id, offset, value, positions), offset + len(value))


def _starts_a_failover(sealer: Sealer, raw: bytes) -> bool:
    """Whether a list's first entry is the START of an attempt after the first (a restored one)."""
    if len(raw) < _HEAD.size:
        return False
    _, index = _HEAD.unpack_from(raw)
    try:
        payload = sealer.open(raw[_HEAD.size :], index, raw[: _HEAD.size])
    except Unauthenticated:
        return False
    kind, attempt = msgpack.unpackb(payload, raw=False)[:2]  # the records' body stays bytes
    return kind == START and attempt > 0


def _open(sealer: Sealer, raw: bytes) -> tuple[bytes, int, bytes]:
    """An entry's writer, index and opened payload; Unauthenticated if this cluster did not seal it for the job."""
    if len(raw) < _HEAD.size:
        sealer.open(None)  # refused: no envelope at all
    writer, index = _HEAD.unpack_from(raw)
    return writer, index, sealer.open(raw[_HEAD.size :], index, raw[: _HEAD.size])


def _open_entries(
    sealer: Sealer, job_id: str, offset: int, value: list[bytes], positions: CollectPositions | None
) -> list[bytes]:
    out = []
    for i, v in enumerate(value):
        try:
            writer, index, payload = _open(sealer, v)
        except Unauthenticated as e:
            raise UnauthenticatedResult(f"job {job_id}'s results hold an entry this cluster did not write: {e}") from None
        if positions is not None and not positions.accept(offset + i, writer, index):
            # A genuine entry pushed again: left out (its offset still counts), so the client goes on
            # with each entry once instead of failing its collect over a copy.
            positions.copies += 1
            log.warning(
                "left out a replayed entry of job %s's results at offset %d (entry %d of a writer whose "
                "entries were read before)", job_id, offset + i, index,
            )
            continue
        out.append(payload)
    return out


def expire_results(client: Any, job_id: str, ttl_s: int = ENDED_TTL_S) -> None:
    """The job ended: its unread results go after a while."""
    pipe = client.pipeline(transaction=False)
    pipe.expire(redis_keys.collect(job_id), ttl_s)
    pipe.expire(redis_keys.collect_meta(job_id), ttl_s)
    pipe.execute()
