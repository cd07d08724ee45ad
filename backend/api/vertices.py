"""Vertex REST resources: subtasks, their times, TaskManagers, backpressure, watermarks and metrics."""
from __future__ import annotations

from typing import Annotated, Any, Callable, TypeVar

from fastapi import APIRouter, HTTPException, Path, Query, Response

from millstream.backend.api.jobs import JobId, load_job, now_ms
from millstream.backend.deps import DispatcherDep, FlameGraphsDep
from millstream.backend.services.flame_graphs import UnknownFlameGraphVertex
from millstream.engine.jobmanager.vertex_flame_graph import TERMINATED, FlameGraphType, no_data
from millstream.backend.services import job_views, metric_views
from millstream.backend.services.metric_aggregation import parse_subtasks
from millstream.engine.jobmanager.dispatcher import Dispatcher

router = APIRouter(tags=["vertices"])

T = TypeVar("T")
VertexId = Annotated[str, Path(description="The vertex (JobVertex) id: 32 hex characters")]
MAX_PAGE = 1000  # subtask rows per answer: a vertex at parallelism 32768 is a 30 MB page otherwise
Offset = Annotated[int, Query(ge=0, le=2**31, description="The first subtask row to return")]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"Subtask rows per page (at most {MAX_PAGE})")]


def _hosts(dispatcher: Dispatcher) -> dict[str, str]:
    return {tm.id: tm.host for tm in dispatcher.slot_pool_snapshot().taskmanagers.values() if tm.host}


def _view(call: Callable[[], T], vid: str) -> T:
    try:
        return call()
    except job_views.UnknownVertex:
        raise HTTPException(404, f"Vertex {vid} not found in this job")


def _paged(answer: dict[str, Any], offset: int) -> dict[str, Any]:
    """Flink's exact shape when the page is the whole list; ``subtasks-total`` and ``offset`` otherwise."""
    if offset == 0 and len(answer["subtasks"]) == answer.get("subtasks-total"):
        answer.pop("subtasks-total")
        answer.pop("offset")
    return answer


def _count_header(response: Response, record: Any, vid: str, offset: int, limit: int) -> None:
    """A list answer (Flink's bare JSON array) has no room for a total: a part of the subtasks says
    how many there are in ``X-Subtasks-Total`` instead; the whole list carries no header, as Flink's."""
    v = _view(lambda: job_views.find_vertex(record, vid), vid)
    if not job_views.is_whole_page(v, offset, limit):
        response.headers["X-Subtasks-Total"] = str(len(v["subtasks"]))


def _csv(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


@router.get("/jobs/{jid}/vertices/{vid}", summary="A vertex and its subtasks")
def vertex_detail(
    dispatcher: DispatcherDep, jid: JobId, vid: VertexId, offset: Offset = 0, limit: Limit = MAX_PAGE
) -> dict[str, Any]:
    """``{id, name, parallelism, maxParallelism, now, subtasks: [{subtask, status, attempt, endpoint,
    start-time, end-time, duration, metrics, taskmanager-id, status-duration}]}``; at most ``limit``
    subtasks from ``offset``, with ``subtasks-total`` when the answer is a part of them."""
    record, hosts = load_job(dispatcher, jid), _hosts(dispatcher)
    return _view(lambda: _paged(job_views.vertex_detail(record, vid, now_ms(), hosts, offset, limit), offset), vid)


@router.get("/jobs/{jid}/vertices/{vid}/flamegraph", summary="Flame graph of a vertex's task threads")
def vertex_flame_graph(
    dispatcher: DispatcherDep, flame_graphs: FlameGraphsDep, jid: JobId, vid: VertexId,
    type: str = Query("full", description="full, on_cpu or off_cpu"),  # noqa: A002 (Flink's parameter name)
) -> dict[str, Any]:
    """Flink's JobVertexFlameGraph (FLIP-165): ``{endTimestamp, data: {name, value, children}}`` from
    samples of the task threads of the vertex's running subtasks. The first request starts sampling
    (100 samples, 20 ms apart) and answers ``endTimestamp`` -3 with no data until it is done; the
    samples are kept for 60 s. A vertex with nothing running answers -2."""
    try:
        kind = FlameGraphType.parse(type)
    except ValueError as e:
        raise HTTPException(400, str(e))
    record = load_job(dispatcher, jid)
    try:
        answer = flame_graphs.flame_graph(record.jid, vid, kind)
    except UnknownFlameGraphVertex:
        raise HTTPException(404, f"Vertex {vid} not found in this job")
    if answer is None:  # the job has ended and left the JobManager's memory
        _view(lambda: job_views.find_vertex(record, vid), vid)
        return no_data(TERMINATED)
    return answer


@router.get("/jobs/{jid}/vertices/{vid}/backpressure", summary="Backpressure of a vertex's subtasks")
def vertex_backpressure(
    dispatcher: DispatcherDep, jid: JobId, vid: VertexId, offset: Offset = 0, limit: Limit = MAX_PAGE
) -> dict[str, Any]:
    """Levels (ok ≤ 0.10 < low ≤ 0.5 < high) from each subtask's backpressured time per second;
    ``{"status": "deprecated"}`` until a subtask has reported. The rows of the subtasks
    ``[offset, offset + limit)``, with ``subtasks-total`` and ``offset`` when that is a part of them;
    the vertex's level is over all of them."""
    record = load_job(dispatcher, jid)
    return _view(lambda: job_views.vertex_backpressure(record, vid, now_ms(), offset, limit), vid)


@router.get("/jobs/{jid}/vertices/{vid}/subtasktimes", summary="When each subtask entered each state")
def vertex_subtasktimes(
    dispatcher: DispatcherDep, jid: JobId, vid: VertexId, offset: Offset = 0, limit: Limit = MAX_PAGE
) -> dict[str, Any]:
    """``{id, name, now, subtasks: [{subtask, endpoint, duration, timestamps {STATE: ts}}]}``, paged as
    ``GET /jobs/{jid}/vertices/{vid}``."""
    record, hosts = load_job(dispatcher, jid), _hosts(dispatcher)
    return _view(lambda: _paged(job_views.vertex_subtasktimes(record, vid, now_ms(), hosts, offset, limit), offset), vid)


@router.get("/jobs/{jid}/vertices/{vid}/taskmanagers", summary="A vertex's subtasks grouped by TaskManager")
def vertex_taskmanagers(dispatcher: DispatcherDep, jid: JobId, vid: VertexId) -> dict[str, Any]:
    """``{id, name, now, taskmanagers: [{endpoint, status, start-time, end-time, duration, metrics,
    status-counts, taskmanager-id}]}``."""
    record, hosts = load_job(dispatcher, jid), _hosts(dispatcher)
    return _view(lambda: job_views.vertex_taskmanagers(record, vid, now_ms(), hosts), vid)


@router.get("/jobs/{jid}/vertices/{vid}/watermarks", summary="Input watermark of each subtask")
def vertex_watermarks(
    dispatcher: DispatcherDep, response: Response, jid: JobId, vid: VertexId, offset: Offset = 0, limit: Limit = MAX_PAGE
) -> list[dict[str, str]]:
    """``[{id: "<subtask>.currentInputWatermark", value}]`` for the subtasks ``[offset, offset + limit)``
    that have a watermark; ``X-Subtasks-Total`` when that is a part of the subtasks."""
    record = load_job(dispatcher, jid)
    _count_header(response, record, vid, offset, limit)
    return _view(lambda: job_views.vertex_watermarks(record, vid, offset, limit), vid)


@router.get("/jobs/{jid}/vertices/{vid}/subtasks/metrics", summary="Subtask metrics aggregated over the vertex")
def subtask_metrics(
    dispatcher: DispatcherDep,
    response: Response,
    jid: JobId,
    vid: VertexId,
    get: str | None = Query(None, description="comma-separated metric names; omit to list them"),
    agg: str | None = Query(None, description="comma-separated: min, max, avg, sum, skew (default: all)"),
    subtasks: str | None = Query(None, description="comma-separated subtask indices and ranges, e.g. 0,2-4 (default: all)"),
    offset: Offset = 0,
    limit: Limit = MAX_PAGE,
) -> list[dict[str, Any]]:
    """``[{id, min, max, avg, sum, skew}]`` with only the requested aggregations, or ``[{id}]`` without ``get``.
    Over the subtasks ``[offset, offset + limit)`` (those of them ``subtasks`` selects);
    ``X-Subtasks-Total`` when that is a part of the subtasks."""
    record = load_job(dispatcher, jid)
    try:
        selected = parse_subtasks(subtasks)
        _count_header(response, record, vid, offset, limit)
        return _view(
            lambda: job_views.subtask_metrics_aggregate(record, vid, _csv(get), _csv(agg), selected, offset, limit), vid
        )
    except ValueError as e:
        raise HTTPException(400, str(e))


@router.get("/jobs/{jid}/vertices/{vid}/metrics", summary="Metrics of a vertex's subtasks, by subtask")
def vertex_metrics(
    dispatcher: DispatcherDep,
    jid: JobId,
    vid: VertexId,
    response: Response,
    get: str | None = Query(None, description="comma-separated ids '<subtask>.<metric>'; omit to list them"),
    offset: Offset = 0,
    limit: Limit = MAX_PAGE,
) -> list[dict[str, str]]:
    """``[{id, value}]`` (values as strings, as Flink answers), or ``[{id}]`` without ``get``. User
    metrics are named ``<subtask>.<operator>.<group...>.<name>``, e.g. ``0.Map.my_group.events``.
    Only ids of the subtasks ``[offset, offset + limit)``; ``X-Subtasks-Total`` when that is a part of them."""
    record = load_job(dispatcher, jid)
    _count_header(response, record, vid, offset, limit)
    return _view(lambda: metric_views.vertex_metrics(record, vid, _csv(get), offset, limit), vid)


@router.get("/jobs/{jid}/vertices/{vid}/subtasks/{subtaskindex}/metrics", summary="Metrics of one subtask")
def one_subtask_metrics(
    dispatcher: DispatcherDep,
    jid: JobId,
    vid: VertexId,
    subtaskindex: int,
    get: str | None = Query(None, description="comma-separated metric ids; omit to list them"),
) -> list[dict[str, str]]:
    """``[{id, value}]`` or ``[{id}]``, ids as in ``subtasks/metrics`` (e.g. ``Map.my_group.events``)."""
    record = load_job(dispatcher, jid)
    return _view(lambda: metric_views.subtask_metrics(record, vid, subtaskindex, _csv(get)), vid)
