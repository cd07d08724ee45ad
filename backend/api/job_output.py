"""A job's print() output over REST (a Millstream addition): the lines its print sinks and user functions
wrote on the TaskManagers or Spark executors, read from the job's print stream in Redis, or from what
the JobStore kept of it once the job ended (backend/services/job_output.py)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from millstream.backend.api.jobs import JobId, load_job
from millstream.backend.deps import DispatcherDep
from millstream.backend.services.job_output import read_output

router = APIRouter(tags=["jobs"])


@router.get("/jobs/{jid}/stdout", summary="The job's print() output, from a line number on")
def job_stdout(
    dispatcher: DispatcherDep,
    jid: JobId,
    offset: int = Query(0, ge=0, le=2**53, description="the number of the first line wanted (0: the job's first line)"),
    maxLines: int = Query(2000, ge=1, le=10_000),  # noqa: N803 (Flink's camelCase)
) -> dict[str, Any]:
    """``{lines, offset, next-offset, dropped, total, first-held, kept, state, ended}``: lines from ``offset``
    on; ``dropped`` lines before them are no longer held, nor any before ``first-held`` (the stream's
    cap, or the bound on what is kept);
    ``ended`` once the job is in a terminal state (read on until ``next-offset`` reaches ``total``);
    ``kept`` when the answer comes from what was kept with the job when it ended (the stream in Redis
    lasts an hour after its last line; the newest 10,000 lines are kept with the job for good)."""
    # The state is read first: once it is terminal, every line the job printed is already in Redis.
    record = load_job(dispatcher, jid)
    return read_output(dispatcher, record, offset, maxLines).to_json(record)
