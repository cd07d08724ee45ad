"""Job REST resources: lists, details, plan, exceptions, config, result, and cancel.

Submission (``POST /jobs``) and collected results live in ``backend/api/submission.py``.
"""
from __future__ import annotations

import re
import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query

from millstream.backend.deps import DispatcherDep
from millstream.backend.services import job_views
from millstream.backend.services.job_views import JobsList, JobsOverview
from millstream.engine.jobmanager.dispatcher import Dispatcher, UnknownJob
from millstream.engine.jobmanager.job_store import JobRecord

router = APIRouter(tags=["jobs"])

_JOB_ID = re.compile(r"[0-9a-fA-F]{32}")
JobId = Annotated[str, Path(description="The job id: 32 hex characters")]


def now_ms() -> int:
    return int(time.time() * 1000)


def load_job(dispatcher: Dispatcher, jid: str) -> JobRecord:
    """The job's record; a malformed or unknown id answers 404, as Flink does."""
    record = dispatcher.job_record(jid.lower()) if _JOB_ID.fullmatch(jid) else None
    if record is None:
        raise UnknownJob(jid)
    return record


@router.get("/jobs", summary="Job ids and states")
def list_jobs(dispatcher: DispatcherDep) -> JobsList:
    """``{jobs: [{id, status}]}``, newest first."""
    return job_views.jobs_list(dispatcher.job_records())


@router.get("/jobs/overview", summary="Overview of every job")
def jobs_overview(dispatcher: DispatcherDep) -> JobsOverview:
    """Each job's name, state, times and task counts (``total`` and lowercase task states)."""
    return job_views.jobs_overview(dispatcher.job_records(), now_ms())


@router.get("/jobs/{jid}", summary="Job details")
def job_detail(dispatcher: DispatcherDep, jid: JobId) -> dict[str, Any]:
    """State, timestamps of every job state, plan, and a summary of each vertex with its I/O metrics.

    While the job waits for slots, ``status-message`` says so (a Millstream addition)."""
    record = load_job(dispatcher, jid)
    detail = job_views.job_detail(record, now_ms())
    message = dispatcher.status_message(detail["jid"])
    if message:
        detail["status-message"] = message
    spark = dispatcher.spark_progress(record)
    if spark is not None:
        detail["spark"] = spark  # Spark's application id, UI URL, jobs and stages (a Millstream addition)
    return detail


@router.patch("/jobs/{jid}", status_code=202, summary="Cancel the job")
def cancel_job(
    dispatcher: DispatcherDep, jid: JobId, mode: str = Query("cancel", description="only 'cancel' is supported")
) -> dict[str, Any]:
    """Requests cancellation and answers 202 with ``{}``; cancelling an ended job is a no-op."""
    if mode != "cancel":
        raise HTTPException(400, f"unsupported mode '{mode}'; the only mode is 'cancel'")
    if not _JOB_ID.fullmatch(jid):
        raise UnknownJob(jid)
    dispatcher.cancel(jid.lower())
    return {}


@router.get("/jobs/{jid}/plan", summary="The job's dataflow plan")
def job_plan(dispatcher: DispatcherDep, jid: JobId) -> dict[str, Any]:
    """``{plan: {jid, name, type, nodes: [{id, parallelism, operator, description, inputs}]}}``."""
    return {"plan": job_views.job_plan(load_job(dispatcher, jid))}


@router.get("/jobs/{jid}/exceptions", summary="The job's exception history")
def job_exceptions(
    dispatcher: DispatcherDep, jid: JobId, maxExceptions: int = Query(20, ge=0, le=1000)  # noqa: N803 (Flink's name)
) -> dict[str, Any]:
    """``{exceptionHistory: {entries, truncated}}`` newest first, plus Flink's legacy
    ``root-exception``, ``timestamp``, ``all-exceptions`` and ``truncated``."""
    record = load_job(dispatcher, jid)
    rows = dispatcher.exceptions(record.jid, maxExceptions + 1)
    return job_views.exceptions(rows, maxExceptions, record.failure_cause)


@router.get("/jobs/{jid}/config", summary="The job's execution config")
def job_config(dispatcher: DispatcherDep, jid: JobId) -> dict[str, Any]:
    """``{jid, name, execution-config {job-parallelism, object-reuse-mode, restart-strategy, user-config}}``."""
    return job_views.job_config(load_job(dispatcher, jid))


@router.get("/jobs/{jid}/accumulators", summary="The job's accumulators")
def job_accumulators(dispatcher: DispatcherDep, jid: JobId) -> dict[str, Any]:
    """Millstream has no user accumulators yet: the lists are always empty."""
    load_job(dispatcher, jid)
    return {"job-accumulators": [], "user-task-accumulators": [], "serialized-user-task-accumulators": {}}


@router.get("/jobs/{jid}/execution-result", summary="The job's result once it has ended")
def job_execution_result(dispatcher: DispatcherDep, jid: JobId) -> dict[str, Any]:
    """``{status: {id: IN_PROGRESS}}`` while the job runs; then ``COMPLETED`` with
    ``job-execution-result {id, application-status, accumulator-results, net-runtime, failure?}``."""
    record = load_job(dispatcher, jid)
    failure = None
    if record.state == "FAILED":
        failure = next(iter(dispatcher.exceptions(record.jid, 1)), None)
    return job_views.execution_result(record, failure)

