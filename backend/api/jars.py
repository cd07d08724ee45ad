"""Uploaded programs, Flink's "jars": upload, list, delete, show the plan, run."""
from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, File, HTTPException, Request, UploadFile
from pydantic import BaseModel, Field

from millstream.backend.deps import DispatcherDep
from millstream.backend.services.program_runner import PlanBusy, ProgramFailed
from millstream.backend.services.programs import ProgramService, UploadTooLarge
from millstream.backend.services.uploads import UploadRejected
from millstream.engine.graph.validation import text_problem

router = APIRouter(tags=["jars"])

_ID = re.compile(r"^[0-9a-f]{32}_[A-Za-z0-9._-]{1,120}$")


def get_programs(request: Request) -> ProgramService:
    return request.app.state.programs


ProgramsDep = Annotated[ProgramService, Depends(get_programs)]


class RunRequest(BaseModel):
    programArgsList: list[str] = Field(default_factory=list)
    parallelism: int | None = Field(default=None, ge=1)
    entryClass: str | None = None
    savepointPath: str | None = None
    allowNonRestoredState: bool | None = None


def _program(programs: ProgramService, jar_id: str):
    info = programs.get(jar_id) if _ID.match(jar_id) else None
    if info is None:
        raise HTTPException(404, f"program {jar_id} not found")
    return info


@router.post("/jars/upload", summary="Upload a .py program or a .zip holding one")
async def upload(programs: ProgramsDep, jarfile: UploadFile = File(...)) -> dict[str, str]:
    try:
        info = programs.upload(jarfile.filename or "program.py", jarfile.file)
    except UploadTooLarge as e:
        raise HTTPException(413, str(e))
    except UploadRejected as e:
        raise HTTPException(400, str(e))
    return {"filename": info.id, "status": "success"}


@router.get("/jars", summary="Uploaded programs")
def list_jars(programs: ProgramsDep, request: Request) -> dict[str, Any]:
    return {
        "address": str(request.base_url).rstrip("/"),
        "files": [
            {
                "id": p.id,
                "name": p.original_name,
                "uploaded": p.uploaded,
                "entry": [{"name": e, "description": None} for e in (p.entry or ())],
            }
            for p in programs.list()
        ],
    }


@router.delete("/jars/{jar_id}", summary="Delete an uploaded program")
def delete_jar(programs: ProgramsDep, jar_id: str) -> dict[str, Any]:
    _program(programs, jar_id)
    programs.delete(jar_id)
    return {}


def _capture(programs: ProgramService, jar_id: str, req: RunRequest):
    info = _program(programs, jar_id)
    try:
        return programs.capture(info, req.programArgsList, req.parallelism, req.entryClass)
    except PlanBusy as e:
        raise HTTPException(429, str(e))
    except ProgramFailed as e:
        raise HTTPException(400, f"the program failed while building its job: {e}")
    except UploadRejected as e:
        raise HTTPException(400, str(e))


@router.post("/jars/{jar_id}/plan", summary="Run the program to show its JobGraph without submitting it")
def jar_plan(programs: ProgramsDep, jar_id: str, req: RunRequest = Body(default_factory=RunRequest)) -> dict[str, Any]:
    captured = _capture(programs, jar_id, req)
    return {"plan": captured.job_graph.to_plan()}


@router.post("/jars/{jar_id}/run", summary="Run the program and submit the job it builds")
def jar_run(
    programs: ProgramsDep, dispatcher: DispatcherDep, jar_id: str, req: RunRequest = Body(default_factory=RunRequest)
) -> dict[str, str]:
    """With ``savepointPath`` the job starts from that savepoint; a missing or corrupt one, or state no
    operator takes without ``allowNonRestoredState``, answers 400 and starts nothing."""
    if req.savepointPath is not None and not req.savepointPath.strip():
        raise HTTPException(400, "savepointPath is empty")
    if req.savepointPath is not None and (why := text_problem(req.savepointPath)):
        raise HTTPException(400, f"savepointPath {why}")
    captured = _capture(programs, jar_id, req)
    job_id = dispatcher.submit(
        captured.job_graph, captured.user_code, req.savepointPath or None, req.allowNonRestoredState
    )
    return {"jobid": job_id}
