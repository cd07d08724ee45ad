"""A job's print() output for REST and the dashboard: from its print stream in Redis while that is
there, else from what the JobStore kept when the job ended (engine/jobmanager/job_output.py), so it
still answers an hour later, after a Redis restart and after a JobManager restart."""
from __future__ import annotations

from dataclasses import dataclass

import redis

from millstream.engine import redis_keys
from millstream.engine.executiongraph.states import JobStatus
from millstream.engine.jobmanager.dispatcher import Dispatcher
from millstream.engine.jobmanager.job_store import OUTPUT_KEPT_CHARS, OUTPUT_KEPT_LINES, JobOutputRecord, JobRecord
from millstream.engine.runtime.io.job_stdout import read_lines, stdout_key


@dataclass(frozen=True)
class OutputBounds:
    """What is held of a job's output, for the dashboard to say."""

    kept_lines: int = OUTPUT_KEPT_LINES  # kept with an ended job
    kept_mib: int = OUTPUT_KEPT_CHARS // (1024 * 1024)
    stream_lines: int = redis_keys.JOB_STDOUT_MAX_LINES  # in its Redis stream


OUTPUT_BOUNDS = OutputBounds()


@dataclass(frozen=True)
class OutputChunk:
    """Lines ``[offset, next_offset)`` of the ``total`` the job printed; ``dropped`` lines before
    ``offset`` were asked for but are no longer held; ``first_held``: the first line held at all (the
    ones before it are gone: the stream's cap, or the bound on what is kept); ``kept`` when read from
    the JobStore."""

    lines: list[str]
    offset: int
    next_offset: int
    dropped: int
    total: int
    kept: bool
    first_held: int

    def to_json(self, record: JobRecord) -> dict[str, object]:
        return {
            "lines": self.lines,
            "offset": self.offset,
            "next-offset": self.next_offset,
            "dropped": self.dropped,
            "total": self.total,
            "kept": self.kept,
            "first-held": self.first_held,
            "state": record.state,
            "ended": JobStatus(record.state).is_terminal(),
        }


def read_output(dispatcher: Dispatcher, record: JobRecord, offset: int, max_lines: int) -> OutputChunk:
    """Up to ``max_lines`` lines of the job's output from line ``offset`` on. An ended job's lines
    within what was kept come from the JobStore (read once, whole, when it ended: a reader may page
    back and forth there), older ones from Redis while its stream lasts."""
    ended = JobStatus(record.state).is_terminal()
    kept = dispatcher.kept_output(record.jid) if ended else None
    if kept is not None and offset >= kept.first:
        return _from_kept(kept, offset, max_lines)
    chunk = None
    try:
        # Only lines sealed for this job by the cluster are its output (engine/runtime/io/job_stdout.py).
        key = stdout_key(dispatcher.config.cluster_secret, record.jid)
        chunk = read_lines(
            dispatcher.client, record.jid, offset, max_lines, key=key, positions=dispatcher.stdout_positions(record.jid)
        )
    except redis.RedisError:
        if kept is None:
            raise
    if chunk is not None and chunk.total > 0:
        first = max(chunk.total - redis_keys.JOB_STDOUT_MAX_LINES, 0)
        return OutputChunk(chunk.lines, chunk.offset, chunk.next_offset, chunk.dropped, chunk.total, False, first)
    if kept is None:
        return OutputChunk([], offset, offset, 0, 0, False, 0)
    return _from_kept(kept, offset, max_lines)


def _from_kept(kept: JobOutputRecord, offset: int, max_lines: int) -> OutputChunk:
    start = min(max(offset, kept.first), kept.first + len(kept.lines))
    lines = kept.lines[start - kept.first : start - kept.first + max_lines]
    return OutputChunk(lines, start, start + len(lines), max(start - offset, 0), kept.total, True, kept.first)


def last_page(dispatcher: Dispatcher, record: JobRecord, max_lines: int) -> OutputChunk:
    """The newest ``max_lines`` lines the job printed (the dashboard opens there, as a log tail does)."""
    total = _total(dispatcher, record)
    return read_output(dispatcher, record, max(total - max_lines, 0), max_lines)


def has_output(dispatcher: Dispatcher, record: JobRecord) -> bool:
    """Whether Millstream holds any print() output of the job."""
    return _total(dispatcher, record) > 0


def _total(dispatcher: Dispatcher, record: JobRecord) -> int:
    try:
        total = int(dispatcher.client.get(redis_keys.job_stdout_total(record.jid)) or 0)
    except redis.RedisError:
        total = 0
    if total == 0 and JobStatus(record.state).is_terminal():
        kept = dispatcher.kept_output(record.jid)
        total = kept.total if kept is not None else 0
    return total
