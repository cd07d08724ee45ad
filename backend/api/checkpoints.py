"""Checkpoint statistics and configuration in Flink's REST shapes."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from millstream.backend.deps import DispatcherDep
from millstream.engine.jobmanager.dispatcher import Dispatcher, UnknownJob

router = APIRouter(tags=["checkpoints"])


def _checkpointing(dispatcher: Dispatcher, jid: str):
    record = dispatcher.job_record(jid.lower())
    if record is None:
        raise UnknownJob(jid)
    return dispatcher.checkpointing(record.jid)


@router.get("/jobs/{jid}/checkpoints", summary="Checkpoint counts, summary, latest and history")
def checkpoints(dispatcher: DispatcherDep, jid: str) -> dict[str, Any]:
    cp = _checkpointing(dispatcher, jid)
    if cp is None:
        raise HTTPException(404, "checkpointing is not enabled for this job (or it ran before this JobManager started)")
    return cp.overview()


@router.get("/jobs/{jid}/checkpoints/config", summary="The job's checkpointing configuration")
def checkpoints_config(dispatcher: DispatcherDep, jid: str) -> dict[str, Any]:
    cp = _checkpointing(dispatcher, jid)
    view = cp.config_view() if cp is not None else None
    if view is None:
        raise HTTPException(404, "checkpointing is not enabled for this job")
    return view


@router.get("/jobs/{jid}/checkpoints/details/{cid}", summary="One checkpoint, per vertex")
def checkpoint_details(dispatcher: DispatcherDep, jid: str, cid: int) -> dict[str, Any]:
    cp = _checkpointing(dispatcher, jid)
    view = cp.details(cid) if cp is not None else None
    if view is None:
        raise HTTPException(404, f"checkpoint {cid} not found")
    return view


@router.get("/jobs/{jid}/checkpoints/details/{cid}/subtasks/{vid}", summary="One checkpoint, per subtask of a vertex")
def checkpoint_subtasks(dispatcher: DispatcherDep, jid: str, cid: int, vid: str) -> dict[str, Any]:
    cp = _checkpointing(dispatcher, jid)
    view = cp.subtasks(cid, vid) if cp is not None else None
    if view is None:
        raise HTTPException(404, f"checkpoint {cid} has no vertex {vid}")
    return view
