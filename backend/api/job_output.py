"""A job's print() output over REST (a Millstream addition): the lines its print sinks and user functions
wrote on the TaskManagers or Spark executors, read from the job's print stream in Redis."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from backend.api.jobs import JobId, load_job
from backend.deps import DispatcherDep
from engine.executiongraph.states import JobStatus
from engine.runtime.io.job_stdout import read_lines, stdout_key

router = APIRouter(tags=["jobs"])


@router.get("/jobs/{jid}/stdout", summary="The job's print() output, from a line number on")
def job_stdout(
    dispatcher: DispatcherDep,
    jid: JobId,
    offset: int = Query(0, ge=0, le=2**53, description="the number of the first line wanted (0: the job's first line)"),
    maxLines: int = Query(2000, ge=1, le=10_000),  # noqa: N803 (Flink's camelCase)
) -> dict[str, Any]:
    """``{lines, offset, next-offset, dropped, total, state, ended}``: lines from ``offset`` on; ``dropped``
    lines before them were lost to the stream's cap; ``ended`` once the job is in a terminal state
    (read on until ``next-offset`` reaches ``total``). Lines are kept an hour after the last one."""
    # The state is read first: once it is terminal, every line the job printed is already in Redis.
    record = load_job(dispatcher, jid)
    # Only lines sealed for this job by the cluster are its output (engine/runtime/io/job_stdout.py).
    key = stdout_key(dispatcher.config.cluster_secret, record.jid)
    chunk = read_lines(dispatcher.client, record.jid, offset, maxLines, key=key, positions=dispatcher.stdout_positions(record.jid))
    return {
        "lines": chunk.lines,
        "offset": chunk.offset,
        "next-offset": chunk.next_offset,
        "dropped": chunk.dropped,
        "total": chunk.total,
        "state": record.state,
        "ended": JobStatus(record.state).is_terminal(),
    }
