"""Savepoints, stop-with-savepoint, savepoint disposal and manual checkpoints in Flink's REST shapes
(asynchronous: each POST answers with a ``request-id`` to poll)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from millstream.backend.api.jobs import JobId, load_job
from millstream.backend.deps import DispatcherDep
from millstream.backend.services.savepoint_views import CHECKPOINT_EXCEPTION, operation_status, savepoint_entry
from millstream.engine.jobmanager.savepoint_disposal import DisposalResults

router = APIRouter(tags=["savepoints"])


class SavepointRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    target_directory: str | None = Field(default=None, alias="target-directory")
    cancel_job: bool = Field(default=False, alias="cancel-job")
    triggerId: str | None = None
    formatType: str | None = None  # Flink's CANONICAL | NATIVE; Millstream has one format


class StopRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    targetDirectory: str | None = None
    drain: bool = False
    triggerId: str | None = None
    formatType: str | None = None


class CheckpointRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    checkpointType: str = "CONFIGURED"  # FULL | INCREMENTAL | CONFIGURED; every Millstream checkpoint is full
    triggerId: str | None = None


class DisposalRequest(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    savepoint_path: str = Field(alias="savepoint-path", min_length=1, max_length=4096)


def _accepted(request_id: str) -> dict[str, str]:
    return {"request-id": request_id}


@router.post("/jobs/{jid}/savepoints", status_code=202, summary="Trigger a savepoint")
def trigger_savepoint(
    dispatcher: DispatcherDep, jid: JobId, req: SavepointRequest = Body(default_factory=SavepointRequest)
) -> dict[str, str]:
    """``{target-directory, cancel-job, triggerId}`` → ``{request-id}``. Without a directory the job's
    ``state.savepoints.dir`` or the cluster's default is used; a repeated ``triggerId`` takes no second savepoint."""
    record = load_job(dispatcher, jid)
    return _accepted(
        dispatcher.trigger_savepoint(
            record.jid, req.target_directory, cancel_job=req.cancel_job, trigger_id=req.triggerId
        )
    )


@router.get("/jobs/{jid}/savepoints", summary="Every savepoint of the job (a Millstream addition)")
def list_savepoints(dispatcher: DispatcherDep, jid: JobId) -> dict[str, Any]:
    record = load_job(dispatcher, jid)
    return {"savepoints": [savepoint_entry(s) for s in dispatcher.savepoints(record.jid)]}


@router.get("/jobs/{jid}/savepoints/{triggerid}", summary="The status of a savepoint request")
def savepoint_status(dispatcher: DispatcherDep, jid: JobId, triggerid: str) -> dict[str, Any]:
    """``{status: {id: IN_PROGRESS|COMPLETED}, operation: {location} | {failure-cause}}``."""
    record = load_job(dispatcher, jid)
    sp = dispatcher.savepoint_status(record.jid, triggerid)
    if sp is None:
        raise HTTPException(404, f"there is no savepoint operation with triggerId={triggerid} for job {record.jid}")
    return operation_status(sp)


@router.post("/jobs/{jid}/stop", status_code=202, summary="Stop the job with a savepoint")
def stop_with_savepoint(
    dispatcher: DispatcherDep, jid: JobId, req: StopRequest = Body(default_factory=StopRequest)
) -> dict[str, str]:
    """``{targetDirectory, drain, triggerId}`` → ``{request-id}``; poll ``/jobs/{jid}/savepoints/{request-id}``.
    The job ends FINISHED once the savepoint completes; if it fails, the job keeps running."""
    record = load_job(dispatcher, jid)
    return _accepted(
        dispatcher.stop_with_savepoint(record.jid, req.targetDirectory, drain=req.drain, trigger_id=req.triggerId)
    )


@router.post("/jobs/{jid}/checkpoints", status_code=202, summary="Trigger a checkpoint by hand")
def trigger_checkpoint(
    dispatcher: DispatcherDep, jid: JobId, req: CheckpointRequest = Body(default_factory=CheckpointRequest)
) -> dict[str, str]:
    if req.checkpointType.upper() not in ("FULL", "INCREMENTAL", "CONFIGURED"):
        raise HTTPException(400, f"checkpointType must be FULL, INCREMENTAL or CONFIGURED, not '{req.checkpointType}'")
    record = load_job(dispatcher, jid)
    return _accepted(dispatcher.trigger_checkpoint(record.jid, req.triggerId))


@router.get("/jobs/{jid}/checkpoints/{triggerid}", summary="The status of a manual checkpoint request")
def checkpoint_status(dispatcher: DispatcherDep, jid: JobId, triggerid: str) -> dict[str, Any]:
    """``{status: {id}, operation: {checkpointId} | {failure-cause}}``."""
    record = load_job(dispatcher, jid)
    status = dispatcher.checkpoint_status(record.jid, triggerid)
    if status is None:
        raise HTTPException(404, f"there is no checkpoint operation with triggerId={triggerid} for job {record.jid}")
    return status


def _disposals(request: Request) -> DisposalResults:
    state = request.app.state
    if not hasattr(state, "savepoint_disposals"):
        state.savepoint_disposals = DisposalResults()
    return state.savepoint_disposals


@router.post("/savepoint-disposal", status_code=202, summary="Dispose of a savepoint")
def dispose_savepoint(dispatcher: DispatcherDep, request: Request, req: DisposalRequest) -> dict[str, str]:
    """``{savepoint-path}`` → ``{request-id}``; poll ``/savepoint-disposal/{request-id}``. Only a savepoint
    directory under the cluster's state directories, written by this cluster, is deleted."""
    return _accepted(_disposals(request).run(req.savepoint_path, dispatcher.state_roots))


@router.get("/savepoint-disposal/{triggerid}", summary="The status of a savepoint disposal")
def savepoint_disposal_status(request: Request, triggerid: str) -> dict[str, Any]:
    """``{status: {id: COMPLETED}, operation: {} | {failure-cause}}``, as Flink answers it."""
    known, failure = _disposals(request).get(triggerid)
    if not known:
        raise HTTPException(404, f"there is no savepoint disposal with triggerId={triggerid[:80]}")
    if failure is None:
        return {"status": {"id": "COMPLETED"}, "operation": {}}
    cause = {"class": CHECKPOINT_EXCEPTION, "stack-trace": failure, "serialized-throwable": None}
    return {"status": {"id": "COMPLETED"}, "operation": {"failure-cause": cause}}
