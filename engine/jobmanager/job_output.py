"""Keeping an ended job's print() output with the job: the newest lines of its print stream in Redis
(engine/runtime/io/job_stdout.py), bounded (``bounded_tail``), go to the JobStore once the job ended,
so they outlive the stream's hour in Redis, a Redis restart and a JobManager restart.

Only lines sealed for the job are kept (``read_lines`` with the job's stdout key), as only those are
ever shown as its output. A line left out that way leaves no gap: the kept lines are numbered back
from the end of the stream, so lines before a forged one are numbered one later than in Redis.
"""
from __future__ import annotations

import redis

from millstream.engine import redis_keys
from millstream.engine.jobmanager.job_store import OUTPUT_KEPT_LINES, JobOutputRecord, JobStore, bounded_tail
from millstream.engine.runtime.io.job_stdout import read_lines, stdout_key
from millstream.engine.security.replay import ElementPositions


def keep_output(
    client: redis.Redis, store: JobStore, jid: str, secret: str | None, now_ms: int
) -> JobOutputRecord | None:
    """Store the newest lines ``jid`` printed; None (nothing stored) when its stream holds none.
    Raises redis.RedisError when Redis cannot be read (the caller tries again later)."""
    raw_total = client.get(redis_keys.job_stdout_total(jid))
    total = int(raw_total or 0)
    if total == 0:
        return None
    key = stdout_key(secret, jid) if secret else None
    chunk = read_lines(
        client, jid, max(total - OUTPUT_KEPT_LINES, 0), OUTPUT_KEPT_LINES, key=key, positions=ElementPositions()
    )
    lines, _ = bounded_tail(chunk.lines, chunk.offset)
    # Lines left out as forged still took their positions: the kept ones end where the chunk ends.
    record = JobOutputRecord(jid=jid, lines=lines, first=chunk.next_offset - len(lines), total=chunk.total, kept_at=now_ms)
    store.save_output(record)
    return record
