"""Cluster pages: Overview, Jobs, Slots, TaskManagers and the JobManager.

Each page has a ``live`` block that its own SSE stream re-renders; htmx
requests (filters, sorting) get just the block that changed.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from millstream.backend.api.cluster import _jobmanager_log, jobmanager_config
from millstream.backend.api.taskmanagers import _log_file, read_tail, shipped_log
from millstream.backend.deps import DispatcherDep, SettingsDep
from millstream.backend.ui import context
from millstream.backend.ui.deps import HistoryDep
from millstream.backend.ui.sse import stream
from millstream.backend.ui.templating import block, is_htmx, templates
from millstream.engine.jobmanager.dispatcher import Dispatcher

router = APIRouter(prefix="/ui", include_in_schema=False)

LOG_LINES = 200
_LOG_BYTES = 64 * 1024


def _log_tail(path: Any) -> str | None:
    if path is None or not path.is_file():
        return None
    lines = read_tail(path, _LOG_BYTES).splitlines()
    return "\n".join(lines[-LOG_LINES:])


def _page_context(page: str, request: Request, dispatcher: Dispatcher, tm: str | None = None) -> dict[str, Any]:
    """What each cluster page's ``live`` block shows."""
    if page == "overview":
        return context.overview_context(dispatcher)
    if page == "slots":
        return context.slots_context(dispatcher)
    if page == "taskmanagers":
        return context.taskmanagers_context(dispatcher)
    if page == "taskmanager":
        ctx = context.taskmanagers_context(dispatcher)
        row = next((r for r in ctx["rows"] if r.id == tm), None)
        slots = [s for s in context.slots_context(dispatcher)["rows"] if s.id == tm]
        info = dispatcher.slot_pool_snapshot().taskmanagers.get(tm or "")
        log = None
        if info is not None:
            path = _log_file(request.app.state.settings, info)
            shipped = shipped_log(dispatcher, info.id) if path is None else None
            log = _log_tail(path) if path is not None else ("\n".join(shipped.splitlines()[-LOG_LINES:]) if shipped else None)
        return {"tm": row, "tm_id": tm, "slots": slots, "log": log, "timeout_ms": ctx["timeout_ms"]}
    if page == "jobmanager":
        return {"log": _log_tail(_jobmanager_log(request.app.state.settings))}
    raise KeyError(page)


_TEMPLATES = {
    "overview": "overview.html",
    "slots": "slots.html",
    "taskmanagers": "taskmanagers.html",
    "taskmanager": "taskmanager.html",
    "jobmanager": "jobmanager.html",
}


def _render(request: Request, page: str, dispatcher: Dispatcher, extra: dict[str, Any] | None = None, tm: str | None = None) -> Response:
    ctx = {"page": page, **_page_context(page, request, dispatcher, tm), **(extra or {})}
    if is_htmx(request) and request.query_params.get("fragment") == "live":  # the polling fallback
        return templates.TemplateResponse(request, _TEMPLATES[page], ctx, block_name="live")
    return templates.TemplateResponse(request, _TEMPLATES[page], ctx)


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, dispatcher: DispatcherDep, _: HistoryDep) -> Response:
    return _render(request, "overview", dispatcher)


@router.get("/slots", response_class=HTMLResponse)
def slots(request: Request, dispatcher: DispatcherDep) -> Response:
    return _render(request, "slots", dispatcher)


@router.get("/taskmanagers", response_class=HTMLResponse)
def taskmanagers(request: Request, dispatcher: DispatcherDep) -> Response:
    return _render(request, "taskmanagers", dispatcher)


@router.get("/taskmanagers/{tm_id}", response_class=HTMLResponse)
def taskmanager(request: Request, dispatcher: DispatcherDep, tm_id: str) -> Response:
    return _render(request, "taskmanager", dispatcher, tm=tm_id)


@router.get("/jobmanager", response_class=HTMLResponse)
def jobmanager(request: Request, dispatcher: DispatcherDep, settings: SettingsDep) -> Response:
    return _render(request, "jobmanager", dispatcher, {"config": jobmanager_config(settings)})


@router.get("/stream/{page}")
def page_stream(request: Request, dispatcher: DispatcherDep, page: str, tm: str | None = None) -> Response:
    """The ``live`` block of a cluster page every two seconds; cluster pages never end."""
    if page not in _TEMPLATES:
        return HTMLResponse("unknown page", status_code=404)

    def produce() -> tuple[list[tuple[str, str]], bool]:
        ctx = {"page": page, "request": request, **_page_context(page, request, dispatcher, tm)}
        return [("live", block(_TEMPLATES[page], "live", **ctx))], False

    return stream(request, produce, interval_s=2.0)


@router.get("/jobs", response_class=HTMLResponse)
def jobs(
    request: Request, dispatcher: DispatcherDep, state: str = "", name: str = "", sort: str = "start", dir: str = "desc"
) -> Response:
    ctx = {"page": "jobs", **context.jobs_context(dispatcher, state, name, sort, dir != "asc")}
    if is_htmx(request):
        return templates.TemplateResponse(request, "jobs.html", ctx, block_name="tables")
    return templates.TemplateResponse(request, "jobs.html", ctx)

