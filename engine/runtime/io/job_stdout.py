"""A job's print stream in Redis: the lines its print() sinks (and task threads) write, for clients.

TaskManagers keep writing those lines to their own stdout (Flink's ``.out``); they also append them
here, so an attached ``millstream run`` can show them as a local run would. The stream is bounded
whoever reads it: a list capped at ``JOB_STDOUT_MAX_LINES`` (the oldest lines go) next to a count of
every line ever appended, so a reader asking from line ``offset`` learns how many it missed. Both
keys expire ``JOB_STDOUT_TTL_S`` after the last append, so a job nobody follows leaves nothing behind.

In a cluster every line is sealed (engine/security/mac.py) with the job's stdout key, a key derived
from the cluster secret for that job's print stream only (``stdout_key``; Spark executors get it, not
the cluster secret). ``read_lines`` opens each line and leaves out (logged and counted) any line that
was not sealed for this job, so text pushed by someone with only the Redis URL never reaches a client
as the job's output. Positions still count it: offsets stay those of the list.

Sealed lines are also numbered, as collect entries are: each goes to Redis as ``writer id (8 bytes)
| index (8 bytes) | envelope``, the MAC covering both, the index counting up per writer (a slot
process's forwarder, per job). The reader's ``ElementPositions`` of the job accepts each number at one
position only, so a genuine line copied and pushed again is left out like a forged one, while reading
the same lines again (a retried request, a second client) shows them again. A reader's positions are
memory: the first read after they were made (a JobManager that restarted) from an offset past the
stream's first line first goes over the lines before that offset, so a line read before the restart
and copied since is known as a copy. The JobManager's positions also keep each writer's highest line
read in SQL (``LineMarkStore``), so a copy pushed after Redis restarted or the stream was deleted
(which empties the stream and its memory of what was read) is still known once the JobManager restarts.

An append is one MULTI/EXEC, so the lines of one call stay together and in order; one writer (a
subtask's thread, a Spark partition) appends in order, so its lines stay in order.
"""
from __future__ import annotations

import logging
import os
import queue
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

import redis

from millstream.engine import redis_keys
from millstream.engine.security.mac import Sealer, Unauthenticated, derive
from millstream.engine.security.replay import ElementPositions

log = logging.getLogger("millstream.stdout")

# Reads the window [offset, offset + count) of the stream atomically: the cap may drop lines between
# reading the total and the list otherwise. Returns {total, first line number available, lines}.
_READ = """
local total = tonumber(redis.call('GET', KEYS[2]) or '0')
local first = total - redis.call('LLEN', KEYS[1])
local offset = math.max(tonumber(ARGV[1]), first)
local start = offset - first
-- %d: Lua would write a large number as 1e+15, which LRANGE refuses
local lines = redis.call('LRANGE', KEYS[1], string.format('%d', start), string.format('%d', start + tonumber(ARGV[2]) - 1))
return {total, first, lines}
"""


@dataclass(frozen=True)
class StdoutChunk:
    """Lines ``[offset, next_offset)`` of the stream; ``dropped`` lines before them were lost to the cap."""

    lines: list[str]
    offset: int
    next_offset: int
    dropped: int
    total: int


def stdout_key(secret: str | bytes | None, job_id: str) -> str:
    """The key that seals ``job_id``'s print lines, derived from the cluster secret."""
    return derive(secret, "stdout", job_id)


def _sealer(key: str | None, job_id: str) -> Sealer | None:
    return Sealer(key, "stdout", job_id) if key else None


_HEAD = struct.Struct(">8sQ")  # writer id, index of the line among that writer's


class LineNumbering:
    """One writer's numbers for the lines it appends to one job's stream."""

    def __init__(self) -> None:
        self.writer = os.urandom(8)
        self.next = 0

    def take(self, n: int) -> range:
        first, self.next = self.next, self.next + n
        return range(first, first + n)


def append_lines(
    client: "redis.Redis | redis.client.Pipeline",
    job_id: str,
    lines: Sequence[str],
    max_lines: int = redis_keys.JOB_STDOUT_MAX_LINES,
    ttl_s: int = redis_keys.JOB_STDOUT_TTL_S,
    key: str | None = None,
    numbering: LineNumbering | None = None,
) -> None:
    """Append ``lines`` (without newlines) to the job's stream, dropping the oldest beyond ``max_lines``;
    sealed with ``key`` (``stdout_key``) when given, and numbered by ``numbering`` (a writer that
    appends more than once keeps one; without it the call is a writer of its own).

    Given a pipeline, the commands join it (the caller executes it); otherwise they run as one
    MULTI/EXEC."""
    if not lines:
        return
    printed = len(lines)  # all are counted, even those beyond the cap: they were printed
    if printed > max_lines:
        lines = lines[-max_lines:]
    sealer = _sealer(key, job_id)
    if sealer is not None:
        numbering = numbering or LineNumbering()
        numbers = numbering.take(printed)[printed - len(lines) :]  # lines beyond the cap keep their numbers
        sealed = []
        for index, line in zip(numbers, lines):
            head = _HEAD.pack(numbering.writer, index)
            sealed.append(head + sealer.seal(line.encode("utf-8", "replace"), index, head))
        lines = sealed  # type: ignore[assignment]
    key, total = redis_keys.job_stdout(job_id), redis_keys.job_stdout_total(job_id)
    own = not isinstance(client, redis.client.Pipeline)
    pipe = client.pipeline(transaction=True) if own else client
    pipe.rpush(key, *lines)
    pipe.ltrim(key, -max_lines, -1)
    pipe.incrby(total, printed)
    pipe.expire(key, ttl_s)
    pipe.expire(total, ttl_s)
    if own:
        pipe.execute()


def read_lines(
    client: redis.Redis,
    job_id: str,
    offset: int,
    max_lines: int = 2000,
    key: str | None = None,
    positions: ElementPositions | None = None,
) -> StdoutChunk:
    """Up to ``max_lines`` lines from line number ``offset`` on (0 is the job's first line); with ``key``
    only lines sealed with it (others are left out, their positions still counted), and with
    ``positions`` (the job's, kept by the reader) no copy of a line read before."""
    total, first, raw = client.eval(
        _READ, 2, redis_keys.job_stdout(job_id), redis_keys.job_stdout_total(job_id), max(offset, 0), max_lines
    )
    start = max(offset, int(first))
    # An offset past the total (keys expired and the job printed again) restarts at what is there.
    if offset > int(total):
        start = int(first)
    sealer = _sealer(key, job_id)
    lines = []
    if positions is not None:
        positions.lock.acquire()
        positions.forget_before(int(first))  # those lines left the stream
        positions.total = int(total)
    try:
        if positions is not None and sealer is not None and not positions.primed:
            positions.primed = True
            _prime(client, job_id, int(first), start, sealer, positions)
        for at, ln in enumerate(raw, start):
            if sealer is not None:
                ln = _judge(job_id, at, ln, sealer, positions)
                if ln is None:
                    continue
            lines.append(ln.decode("utf-8", "replace") if isinstance(ln, bytes) else str(ln))
        if positions is not None:
            positions.save_durable(start + len(raw))  # before the lines go to a client
    finally:
        if positions is not None:
            positions.lock.release()
    return StdoutChunk(lines, start, start + len(raw), max(start - offset, 0), int(total))


def _judge(job_id: str, at: int, ln: bytes, sealer: Sealer, positions: ElementPositions | None) -> bytes | None:
    """The line at position ``at`` opened, or None if it was not sealed for the job or is a copy."""
    try:
        writer, index = _HEAD.unpack_from(ln) if len(ln) >= _HEAD.size else (b"", -1)
        opened = sealer.open(ln[_HEAD.size :], index, ln[: _HEAD.size])
    except Unauthenticated:
        return None  # not the job's output: never shown as if it were
    if positions is not None and not positions.accept(at, writer, index):
        log.warning("left out a copied line of job %s's output at line %d", job_id, at)
        return None
    return opened


def _prime(client: redis.Redis, job_id: str, first: int, start: int, sealer: Sealer, positions: ElementPositions) -> None:
    """New positions asked for lines from ``start``: take in the lines still in the stream before it
    first, as if they had been read, so a copy of one of them further on is known (done once)."""
    at = first
    while at < start:
        count = min(start - at, 10_000)
        _, got_first, raw = client.eval(
            _READ, 2, redis_keys.job_stdout(job_id), redis_keys.job_stdout_total(job_id), at, count
        )
        at = max(at, int(got_first))  # the cap may have dropped some meanwhile
        if not raw:
            return
        for i, ln in enumerate(raw, at):
            if i < start:
                _judge(job_id, i, ln, sealer, positions)
        at += len(raw)


class StdoutForwarder:
    """Appends printed lines to their job's stream from a background thread of the hosting process.

    The printing thread only queues (a full queue, 64 batches, blocks it as a full stdout pipe would), so a slow
    Redis never sits inside a user function; ``flush`` waits until everything queued so far is in
    Redis, which a task calls before it reports itself ended, so a client that drains the stream
    after the job ended sees every line."""

    def __init__(self, client: redis.Redis, max_pending: int = 64, secret: str | bytes | None = None) -> None:
        self.client = client
        self.secret = secret  # the cluster secret: each job's lines are sealed with its stdout key
        self._keys: dict[str, str] = {}
        self._numbering: dict[str, LineNumbering] = {}  # per job: this process is one writer of its stream
        self._warned_at = float("-inf")
        self._queue: queue.Queue[tuple[str, list[str]] | threading.Event] = queue.Queue(max_pending)
        self._thread = threading.Thread(target=self._loop, name="stdout-forwarder", daemon=True)
        self._thread.start()

    def write(self, job_id: str, lines: list[str]) -> None:
        if lines:
            self._queue.put((job_id, lines))

    def flush(self, timeout: float = 10.0) -> bool:
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def _key(self, job_id: str) -> str | None:
        if not self.secret:
            return None
        key = self._keys.get(job_id)
        if key is None:
            if len(self._keys) > 1024:  # a long-lived slot runs many jobs
                self._keys.clear()
                self._numbering.clear()  # a new writer id for a job seen again: still unique
            key = self._keys[job_id] = stdout_key(self.secret, job_id)
        return key

    def _numbers(self, job_id: str) -> LineNumbering:
        n = self._numbering.get(job_id)
        if n is None:
            n = self._numbering[job_id] = LineNumbering()
        return n

    def _loop(self) -> None:
        while True:
            items: list[Any] = [self._queue.get()]
            while True:  # everything queued meanwhile goes in one round trip
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            by_job: dict[str, list[str]] = {}
            for item in items:
                if isinstance(item, tuple):
                    by_job.setdefault(item[0], []).extend(item[1])
            try:
                pipe = self.client.pipeline(transaction=True)
                for job_id, lines in by_job.items():
                    append_lines(pipe, job_id, lines, key=self._key(job_id), numbering=self._numbers(job_id))
                if by_job:
                    pipe.execute()
            except redis.RedisError:
                # The lines are still on the TaskManager's stdout; a client just misses them.
                if time.monotonic() - self._warned_at > 60:  # once a minute, not once a batch
                    self._warned_at = time.monotonic()
                    log.warning("could not forward printed lines to Redis", exc_info=True)
            for item in items:
                if isinstance(item, threading.Event):
                    item.set()
