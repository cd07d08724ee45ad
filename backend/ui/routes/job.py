"""The job page: header and tabs, each tab with its own SSE stream while the job runs."""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from millstream.backend.deps import DispatcherDep, FlameGraphsDep
from millstream.backend.services import jobmanager_metrics
from millstream.backend.services.flame_graphs import UnknownFlameGraphVertex
from millstream.backend.ui.latency_view import latency_rows, operator_names
from millstream.engine.jobmanager.vertex_flame_graph import TERMINATED, FlameGraphType, no_data
from millstream.backend.ui import context
from millstream.backend.ui.deps import HistoryDep
from millstream.backend.ui.job_view import TAB_IDS
from millstream.backend.ui.sse import SharedTicks, stream
from millstream.backend.ui.templating import block, is_htmx, templates
from millstream.engine.jobmanager.dispatcher import Dispatcher, UnknownJob

router = APIRouter(prefix="/ui/jobs", include_in_schema=False)
# Every viewer of one job tab gets the same events; the blocks read no per-request state.
_ticks = SharedTicks()
Page = Annotated[int, Query(ge=1, le=1_000_000)]  # the Subtasks tab's page; out of range is clamped to the last


def _not_found(request: Request, jid: str) -> Response:
    ctx = {"page": "jobs", "message": f"There is no job {jid}.", "hint": "Pick one from the Jobs list."}
    return templates.TemplateResponse(request, "not_found.html", ctx, status_code=404)


def _view(view: str) -> str:
    return "execution" if view == "execution" else "job"


@router.get("/{jid}")
def job_root(jid: str) -> Response:
    return RedirectResponse(f"/ui/jobs/{jid}/graph", status_code=307)


@router.get("/{jid}/{tab}", response_class=HTMLResponse)
def job_tab(
    request: Request, dispatcher: DispatcherDep, history: HistoryDep, jid: str, tab: str, view: str = "job",
    page: Page = 1,
) -> Response:
    if tab not in TAB_IDS:
        return _not_found(request, f"{jid} tab {tab}")
    try:
        ctx = {"page": "jobs", **context.job_context(dispatcher, history, jid, tab, _view(view), page)}
    except UnknownJob:
        return _not_found(request, jid)
    if is_htmx(request):  # a tab switch: the whole live section, with its new stream
        return templates.TemplateResponse(request, "job.html", ctx, block_name="live")
    return templates.TemplateResponse(request, "job.html", ctx)


@router.get("/{jid}/{tab}/stream")
def job_stream(
    request: Request, dispatcher: DispatcherDep, history: HistoryDep, jid: str, tab: str, view: str = "job",
    page: Page = 1,
) -> Response:
    """``header`` (and ``body`` for live tabs, ``series`` JSON for Throughput) every second
    until the job has ended; then one last update and ``close``."""
    if tab not in TAB_IDS:
        return HTMLResponse("unknown tab", status_code=404)

    def render() -> tuple[list[tuple[str, str]], bool]:
        # The Output tab's stream carries only the header: its lines are paged by the reader, not re-read each second.
        ctx = {
            "request": request, "page": "jobs",
            **context.job_context(dispatcher, history, jid, tab, _view(view), page, body=tab != "output"),
        }
        events = [("header", block("job.html", "header", **ctx))]
        if ctx["live_body"]:
            events.append(("body", block("job.html", "body", **ctx)))
        if tab == "throughput":
            events.append(("series", ctx["series_json"]))
        if tab == "checkpoints" and ctx["checkpoints"] is not None:
            events.extend(checkpoint_events(ctx))
        if tab == "savepoints":  # only the rows: the resume forms inside are hx-preserve'd
            events.append(("sp-rows", block("job/savepoints.html", "rows", **ctx)))
        done = not ctx["header"].alive
        if done:  # once: the Cancel button goes away when the job has ended
            events.append(("actions", block("job.html", "actions", **ctx)))
        return events, done

    def produce() -> tuple[list[tuple[str, str]], bool]:
        return _ticks.get((id(dispatcher), jid.lower(), tab, _view(view), page), render)

    return stream(request, produce, interval_s=1.0)


def checkpoint_events(ctx: dict) -> list[tuple[str, str]]:
    """The Checkpoints tab updates in parts, so the chart keeps its canvas and an expanded
    history row (``hx-preserve``) stays open: counts, history, summary, and the chart's JSON."""
    parts = [(f"cp-{name}", block("job/checkpoints.html", name, **ctx)) for name in ("counts", "history", "summary")]
    return [*parts, ("cp-series", ctx["cp_series_json"])]


@router.get("/{jid}/checkpoints/details/{cid}", response_class=HTMLResponse)
def checkpoint_detail(request: Request, dispatcher: DispatcherDep, jid: str, cid: int) -> Response:
    """One checkpoint per vertex and subtask: the row an expanded history entry shows."""
    try:
        ctx = context.checkpoint_detail_context(dispatcher, jid, cid)
    except UnknownJob:
        ctx = {"jid": jid, "checkpoint_id": cid, "detail": None, "missing": "This job has no checkpoint statistics here."}
        return templates.TemplateResponse(request, "partials/checkpoint_detail.html", ctx, status_code=404)
    return templates.TemplateResponse(request, "partials/checkpoint_detail.html", ctx)


@router.get("/{jid}/output/lines", response_class=HTMLResponse)
def output_lines(request: Request, dispatcher: DispatcherDep, jid: str, offset: Annotated[int, Query(ge=0, le=2**53)] = 0) -> Response:
    """One page of the Output tab (its Earlier / Later / Newest buttons swap it in place)."""
    try:
        ctx = context.output_context(dispatcher, jid, offset)
    except UnknownJob:
        return _not_found(request, jid)
    return templates.TemplateResponse(request, "job/output.html", ctx, block_name="lines")


@router.get("/{jid}/flamegraph/data")
def flame_graph_data(
    dispatcher: DispatcherDep, flame_graphs: FlameGraphsDep, jid: str, vertex: str, type: str = "full"  # noqa: A002
) -> Response:
    """The Flame Graph tab's data: the REST answer (``{endTimestamp, data}``) for the chosen vertex."""
    try:
        kind = FlameGraphType.parse(type)
        answer = flame_graphs.flame_graph(jid, vertex, kind)
    except ValueError as e:
        return JSONResponse({"errors": [str(e)]}, status_code=400)
    except UnknownFlameGraphVertex:
        return JSONResponse({"errors": [f"Vertex {vertex} not found in this job"]}, status_code=404)
    return JSONResponse(answer if answer is not None else no_data(TERMINATED))


@router.get("/{jid}/throughput/latency", response_class=HTMLResponse)
def latency_table(request: Request, dispatcher: DispatcherDep, jid: str) -> Response:
    """The Throughput tab's latency-marker table (polled while the job runs): p50/p99/max per source,
    operator and subtask, from the histograms the tasks report."""
    rows = latency_rows(jobmanager_metrics.latency_histograms(dispatcher, jid), _operator_names(dispatcher, jid))
    return templates.TemplateResponse(request, "partials/latency_table.html", {"rows": rows})


def _operator_names(dispatcher: Dispatcher, jid: str) -> dict[str, str]:
    try:
        record = dispatcher.job_record(jid)
    except Exception:
        return {}
    return operator_names(record.job_graph if record is not None else {})


@router.get("/{jid}/throughput/data")
def throughput_data(dispatcher: DispatcherDep, history: HistoryDep, jid: str) -> Response:
    """The chart's series as JSON, for the polling fallback."""
    ctx = context.job_context(dispatcher, history, jid, "throughput", "job")
    return Response(ctx["series_json"], media_type="application/json")



