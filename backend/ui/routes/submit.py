"""The Submit page: upload a program, show its plan as a DAG, submit it.

Uses the same ProgramService and Dispatcher as ``/jars``; every POST is
CSRF-checked and login-checked like the other dashboard actions."""
from __future__ import annotations

import json
import re

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, Response

from millstream.backend.deps import DispatcherDep, SettingsDep
from millstream.backend.services.program_runner import PlanBusy, ProgramFailed
from millstream.backend.services.programs import ProgramService, UploadTooLarge
from millstream.backend.services.uploads import UploadRejected
from millstream.backend.ui import graph_view
from millstream.backend.ui.routes.actions import result
from millstream.backend.ui.security import UIRefused, check_mutation
from millstream.backend.ui.templating import templates
from millstream.engine.jobmanager.dispatcher import JobSubmissionError

router = APIRouter(prefix="/ui/submit", include_in_schema=False)
_ID = re.compile(r"^[0-9a-f]{32}_[A-Za-z0-9._-]{1,120}$")


def _programs(request: Request) -> ProgramService:
    return request.app.state.programs


def _args(text: str) -> list[str]:
    return text.split()


def _parallelism(text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    value = int(text)
    if value < 1:
        raise ValueError("parallelism must be at least 1")
    return value


@router.get("", response_class=HTMLResponse)
def submit_page(request: Request) -> Response:
    ctx = {"page": "submit", "programs": _programs(request).list()}
    return templates.TemplateResponse(request, "submit.html", ctx)


@router.post("/upload")
def upload(request: Request, settings: SettingsDep, jarfile: UploadFile = File(...)) -> Response:
    try:
        check_mutation(request, settings.auth_token)
        _programs(request).upload(jarfile.filename or "program.py", jarfile.file)
    except UIRefused as e:
        return result(request, False, str(e), "upload", e.status)
    except (UploadTooLarge, UploadRejected) as e:
        return result(request, False, f"Upload refused: {e}", "upload", 400)
    ctx = {"programs": _programs(request).list()}
    return templates.TemplateResponse(request, "submit.html", ctx, block_name="programs")


def _capture(request: Request, jar_id: str, args: str, parallelism: str):
    info = _programs(request).get(jar_id) if _ID.match(jar_id) else None
    if info is None:
        raise ValueError(f"There is no uploaded program {jar_id}.")
    return _programs(request).capture(info, _args(args), _parallelism(parallelism))


@router.post("/{jar_id}/plan")
def plan(
    request: Request, settings: SettingsDep, jar_id: str, args: str = Form(""), parallelism: str = Form("")
) -> Response:
    try:
        check_mutation(request, settings.auth_token)  # running a program is an action, even without submitting
        captured = _capture(request, jar_id, args, parallelism)
    except UIRefused as e:
        return result(request, False, str(e), "plan", e.status)
    except PlanBusy as e:
        return result(request, False, f"Busy: {e}.", "plan", 429)
    except (ValueError, ProgramFailed, UploadRejected) as e:
        return result(request, False, f"The program failed while building its job: {e}", "plan", 400)
    g = captured.job_graph.to_dict()
    vertices = [
        {"id": v["id"], "name": v["name"], "parallelism": v["parallelism"], "status": "CREATED", "subtasks": []}
        for v in g["vertices"]
    ]
    model = graph_view.graph_model(g, vertices, live=False, view="plan")
    ctx = {"graph": model, "graph_json": json.dumps(model.layout_json()), "plan_name": g["name"]}
    return templates.TemplateResponse(request, "partials/plan.html", ctx)


@router.post("/{jar_id}/run")
def run(
    request: Request,
    dispatcher: DispatcherDep,
    settings: SettingsDep,
    jar_id: str,
    args: str = Form(""),
    parallelism: str = Form(""),
    savepoint_path: str = Form(""),
    allow_non_restored_state: bool = Form(False),
) -> Response:
    """As ``POST /jars/{id}/run``: with a savepoint path the job starts from it, and a missing or
    corrupt savepoint, or state no operator takes without allowNonRestoredState, starts nothing."""
    try:
        check_mutation(request, settings.auth_token)
        captured = _capture(request, jar_id, args, parallelism)
        jid = dispatcher.submit(
            # unticked means "not asked", so a job's own ignore-unclaimed-state option still holds
            captured.job_graph, captured.user_code, savepoint_path.strip() or None, allow_non_restored_state or None
        )
    except UIRefused as e:
        return result(request, False, str(e), "run", e.status)
    except PlanBusy as e:
        return result(request, False, f"Busy: {e}.", "run", 429)
    except (ValueError, ProgramFailed, UploadRejected, JobSubmissionError) as e:
        return result(request, False, f"Could not submit: {e}", "run", 400)
    resp = result(request, True, f"Submitted job {jid}.", "run")
    resp.headers["HX-Redirect"] = f"/ui/jobs/{jid}/graph"  # open the job page, as the issue asks
    return resp
