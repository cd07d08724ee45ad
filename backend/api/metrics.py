"""Metrics: the JobManager's Prometheus endpoint, its scrape-target list, and Flink's REST metric
queries for the JobManager, the TaskManagers and a job (``?get=``, ``?agg=``, selectors)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from millstream.backend.api.jobs import JobId, load_job
from millstream.backend.deps import DispatcherDep
from millstream.backend.services import jobmanager_metrics
from millstream.backend.services.metric_aggregation import aggregate, values_answer
from millstream.engine.metrics.job_metrics import job_values
from millstream.engine.metrics.taskmanager_metrics import taskmanager_values
from millstream.engine.runtime.latency_markers import rest_values as latency_rest_values

router = APIRouter(tags=["metrics"])

GET_HELP = "comma-separated metric names; omit to list them"
AGG_HELP = "comma-separated: min, max, avg, sum, skew (default: all)"


def _csv(value: str | None) -> list[str]:
    return [part.strip() for part in (value or "").split(",") if part.strip()]


def _aggregated(samples: list[dict[str, Any]], get: str | None, agg: str | None) -> list[dict[str, Any]]:
    try:
        return aggregate(samples, _csv(get), _csv(agg))
    except ValueError as e:
        raise HTTPException(400, str(e))


@router.get("/metrics", summary="Prometheus metrics of the JobManager", response_class=Response)
def prometheus_metrics(dispatcher: DispatcherDep) -> Response:
    """Flink's reporter names in Prometheus's text format: ``flink_jobmanager_*`` and, per running job,
    ``flink_jobmanager_job_*`` labelled ``job_id``, ``job_name``, ``host``. Read at scrape time."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(jobmanager_metrics.JobManagerCollector(dispatcher, jobmanager_metrics.host_name()))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/metrics/targets", summary="Prometheus HTTP service discovery")
def prometheus_targets(dispatcher: DispatcherDep, request: Request) -> list[dict[str, Any]]:
    """``[{targets: ["host:port"], labels: {component}}]``: this JobManager, as the caller reached it,
    and each TaskManager's own endpoint (for ``http_sd_configs``)."""
    address = request.url.netloc or f"{request.url.hostname}:{request.url.port}"
    return jobmanager_metrics.scrape_targets(dispatcher, address)


@router.get("/jobmanager/metrics", summary="Metrics of the JobManager")
def jobmanager_metric_values(
    dispatcher: DispatcherDep, get: str | None = Query(None, description=GET_HELP)
) -> list[dict[str, str]]:
    """``[{id, value}]``, or ``[{id}]`` without ``get`` (``numRegisteredTaskManagers``, ...)."""
    return values_answer(jobmanager_metrics.jobmanager_metric_values(dispatcher), _csv(get))


@router.get("/jobs/metrics", summary="Job metrics aggregated over running jobs")
def jobs_metrics(
    dispatcher: DispatcherDep,
    get: str | None = Query(None, description=GET_HELP),
    agg: str | None = Query(None, description=AGG_HELP),
    jobs: str | None = Query(None, description="comma-separated job ids (default: every running job)"),
) -> list[dict[str, Any]]:
    """``[{id, min, max, avg, sum, skew}]`` over the selected running jobs, or ``[{id}]`` without ``get``."""
    chosen = set(_csv(jobs)) or None
    now = jobmanager_metrics.now_ms()
    samples = [
        job_values(j, now) for j in jobmanager_metrics.running_jobs(dispatcher) if chosen is None or j.job_id in chosen
    ]
    return _aggregated(samples, get, agg)


@router.get("/jobs/{jid}/metrics", summary="Metrics of a job")
def job_metric_values(
    dispatcher: DispatcherDep, jid: JobId, get: str | None = Query(None, description=GET_HELP)
) -> list[dict[str, str]]:
    """``[{id, value}]`` (``numRestarts``, ``uptime``, ``downtime``, checkpoint counts and sizes, and
    with latency tracking on Flink's ``latency.source_id.<id>.operator_id.<id>.operator_subtask_index.<n>
    .latency_<stat>`` histogram figures), or ``[{id}]`` without ``get``. Empty once the job has ended,
    as Flink's are."""
    record = load_job(dispatcher, jid)  # 404 for a job the cluster never had
    inputs = jobmanager_metrics.job_inputs(dispatcher, record.jid)
    if inputs is None or inputs.status.is_terminal():
        return []
    values = job_values(inputs, jobmanager_metrics.now_ms())
    values.update(latency_rest_values(jobmanager_metrics.latency_histograms(dispatcher, record.jid)))
    return values_answer(values, _csv(get))


@router.get("/taskmanagers/metrics", summary="TaskManager metrics aggregated over TaskManagers")
def taskmanagers_metrics(
    dispatcher: DispatcherDep,
    get: str | None = Query(None, description=GET_HELP),
    agg: str | None = Query(None, description=AGG_HELP),
    taskmanagers: str | None = Query(None, description="comma-separated TaskManager ids (default: all)"),
) -> list[dict[str, Any]]:
    """``[{id, min, max, avg, sum, skew}]`` over the selected TaskManagers, or ``[{id}]`` without ``get``."""
    chosen = set(_csv(taskmanagers)) or None
    ids = [t for t in dispatcher.slot_pool_snapshot().taskmanagers if chosen is None or t in chosen]
    samples = [taskmanager_values(dispatcher.taskmanager_metrics(t)) for t in ids]
    return _aggregated(samples, get, agg)


@router.get("/taskmanagers/{tmid}/metrics", summary="Metrics of a TaskManager")
def taskmanager_metric_values(
    dispatcher: DispatcherDep, tmid: str, get: str | None = Query(None, description=GET_HELP)
) -> list[dict[str, str]]:
    """``[{id, value}]`` (``Status.JVM.CPU.Load``, ...), or ``[{id}]`` without ``get``."""
    if tmid not in dispatcher.slot_pool_snapshot().taskmanagers:
        raise HTTPException(404, f"TaskManager {tmid} not found")
    return values_answer(taskmanager_values(dispatcher.taskmanager_metrics(tmid)), _csv(get))
