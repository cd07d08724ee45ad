"""Gathers what each dashboard page shows: the only place in ``backend/ui`` that
calls the Dispatcher. Routes and SSE streams call these, then render; templates
only read the view models they are given (templates never query)."""
from __future__ import annotations

import json
import time
from typing import Any

from millstream.backend.api.jobs import load_job
from millstream.backend.services import job_output, job_views
from millstream.backend.ui import backpressure_view, checkpoint_view, cluster_view, graph_view, job_view, savepoint_view, spark_view
from millstream.backend.ui.throughput import ThroughputHistory
from millstream.engine.jobmanager.dispatcher import Dispatcher, UnknownJob
from millstream.engine.jobmanager.job_store import JobRecord

EXCEPTIONS_SHOWN = 50
OUTPUT_PAGE_LINES = 1000  # the Output tab's lines per page


def now_ms() -> int:
    return int(time.time() * 1000)


def hosts_of(dispatcher: Dispatcher) -> dict[str, str]:
    return {tm.id: tm.host for tm in dispatcher.slot_pool_snapshot().taskmanagers.values() if tm.host}


def overview_context(dispatcher: Dispatcher) -> dict[str, Any]:
    now = now_ms()
    running, completed = cluster_view.split_jobs(dispatcher.job_records(), now)
    return {
        "counts": dispatcher.overview(), "running": running, "completed": completed[:20], "now": now,
        "data_servers": dispatcher.data_server_states(),
    }


def jobs_context(dispatcher: Dispatcher, state: str, name: str, sort: str, descending: bool) -> dict[str, Any]:
    now = now_ms()
    running, completed = cluster_view.split_jobs(dispatcher.job_records(), now)
    return {
        "running": cluster_view.filter_jobs(running, state, name, sort, descending),
        "completed": cluster_view.filter_jobs(completed, state, name, sort, descending),
        "filters": {"state": state, "name": name, "sort": sort, "dir": "desc" if descending else "asc"},
        "total": len(running) + len(completed),
    }


def slots_context(dispatcher: Dispatcher) -> dict[str, Any]:
    pool = dispatcher.slot_pool_snapshot()
    records: dict[str, JobRecord] = {}
    for jid in set(pool.allocations.values()):
        rec = dispatcher.job_record(jid)
        if rec is not None:
            records[jid] = rec
    return {"rows": cluster_view.slots_grid(pool, records), "counts": dispatcher.overview()}


def taskmanagers_context(dispatcher: Dispatcher) -> dict[str, Any]:
    pool = dispatcher.slot_pool_snapshot()
    metrics = {tm: dispatcher.taskmanager_metrics(tm) for tm in pool.taskmanagers}
    cfg = dispatcher.config
    rows = cluster_view.taskmanager_rows(pool, metrics, now_ms(), cfg.heartbeat_interval_ms, cfg.heartbeat_timeout_ms)
    return {"rows": rows, "timeout_ms": cfg.heartbeat_timeout_ms}


def job_context(
    dispatcher: Dispatcher, history: ThroughputHistory, jid: str, tab: str, view: str, page: int = 1,
    body: bool = True,
) -> dict[str, Any]:
    """Everything the job page's header and the chosen tab need (without ``body``, only what the header
    and the actions need: a stream of a tab whose body is not live). Raises UnknownJob."""
    record = load_job(dispatcher, jid)
    now = now_ms()
    history.record(record, now)
    header = job_view.job_header(record, now, dispatcher.status_message(record.jid))
    ctx: dict[str, Any] = {
        "header": header,
        "tab": tab,
        "tabs": job_view.tabs_for(header.job_type, on_spark(dispatcher, record), job_output.has_output(dispatcher, record)),
        "view": view,
        "subtask_page": page,  # of the Subtasks tab's tables ("page" is the nav's)
        "live_body": tab in job_view.LIVE_TABS,
        "on_spark": on_spark(dispatcher, record),
        "savepoint_dir": savepoint_view.default_savepoint_dir(
            record.job_graph.get("config") or {}, dispatcher.config.savepoint_dir
        ),
        "now": now,
    }
    if body:
        ctx.update(_tab_context(dispatcher, history, record, tab, view, now, header.alive, page))
    return ctx


def _tab_context(
    dispatcher: Dispatcher, history: ThroughputHistory, record: JobRecord, tab: str, view: str, now: int, alive: bool,
    page: int = 1,
) -> dict[str, Any]:
    vertices = job_views.vertices_of(record)
    if tab == "graph":
        failed = any(v.get("status") == "FAILED" for v in vertices)
        failures = graph_view.failure_lines(dispatcher.exceptions(record.jid, 20)) if failed else None
        if failed and record.failure_cause:
            # A failure of the whole job (no slots in time) names no vertex: each failed vertex shows it.
            cause = record.failure_cause.strip().splitlines()[-1][:300]
            failures = {v["id"]: (failures or {}).get(v["id"], cause) for v in vertices if v.get("status") == "FAILED"}
        model = graph_view.graph_model(record.job_graph, vertices, alive, view, failures)
        return {"graph": model, "graph_json": json.dumps(model.layout_json())}
    if tab == "subtasks":
        return {"vertices": job_view.subtasks_tab(record, now, hosts_of(dispatcher), page)}
    if tab == "backpressure":
        bp = backpressure_view.backpressure_vertices(record, now)
        edges = [(e["source_vertex"], e["target_vertex"]) for e in record.job_graph.get("edges", [])]
        return {"bp_vertices": bp, "bottleneck": backpressure_view.find_bottleneck(bp, edges) if alive else None}
    if tab == "watermarks":
        return {"watermarks": job_view.watermarks_tab(record)}
    if tab == "timeline":
        rows = job_view.timeline_tab(record, now)
        return {"timeline": rows, "span": job_view.timeline_span(rows)}
    if tab == "exceptions":
        rows = dispatcher.exceptions(record.jid, EXCEPTIONS_SHOWN + 1)
        entries, truncated, root = job_view.exceptions_tab(rows, EXCEPTIONS_SHOWN, record.failure_cause)
        return {"exceptions": entries, "truncated": truncated, "root_cause": root}
    if tab == "throughput":
        return {"series_json": script_json(throughput_series(history, record))}
    if tab == "flamegraph":
        return {"flame_vertices": [(v["id"], v["name"]) for v in vertices]}
    if tab == "spark":
        engine = batch_engine(dispatcher, record)
        progress = dispatcher.spark_progress(record)
        return {"spark": spark_view.spark_progress(progress, engine, alive)}
    if tab == "output":
        return {
            "output": job_output.last_page(dispatcher, record, OUTPUT_PAGE_LINES), "output_page": OUTPUT_PAGE_LINES,
            "output_bounds": job_output.OUTPUT_BOUNDS,
        }
    if tab == "configuration":
        return {"config": job_view.configuration_tab(record), "plan": job_views.job_plan(record)}
    if tab == "checkpoints":
        return checkpoints_context(dispatcher, record)
    if tab == "savepoints":
        return {"savepoints": savepoints_of(dispatcher, record, alive)}
    return {}


def output_context(dispatcher: Dispatcher, jid: str, offset: int) -> dict[str, Any]:
    """One page of the Output tab from line ``offset`` on. Raises UnknownJob."""
    record = load_job(dispatcher, jid)
    chunk = job_output.read_output(dispatcher, record, offset, OUTPUT_PAGE_LINES)
    return {
        "header": job_view.job_header(record, now_ms(), None), "output": chunk, "output_page": OUTPUT_PAGE_LINES,
        "output_bounds": job_output.OUTPUT_BOUNDS,
    }


def batch_engine(dispatcher: Dispatcher, record: JobRecord) -> str:
    return str((record.job_graph.get("config") or {}).get("execution.batch-engine", dispatcher.config.batch_engine))


def on_spark(dispatcher: Dispatcher, record: JobRecord) -> bool:
    """A BATCH job on Spark takes no savepoints; the page offers none."""
    return record.job_type == "BATCH" and batch_engine(dispatcher, record) == "spark"


def savepoints_of(dispatcher: Dispatcher, record: JobRecord, alive: bool) -> savepoint_view.SavepointsTab:
    """Every savepoint of the job, newest first: from SQL, so an ended job's are there too."""
    return savepoint_view.savepoints_tab(
        dispatcher.savepoints(record.jid), record.job_graph,
        alive=alive, on_spark=on_spark(dispatcher, record), cluster_dir=dispatcher.config.savepoint_dir,
    )


def checkpoints_context(dispatcher: Dispatcher, record: JobRecord) -> dict[str, Any]:
    """``checkpoints`` is None when the JobManager holds no checkpointing for the job;
    ``configured_interval`` then tells "off" from "on, but its statistics are gone"."""
    cp = dispatcher.checkpointing(record.jid)
    if cp is None:
        interval = checkpoint_view.configured_interval(record.job_graph.get("config") or {})
        return {"checkpoints": None, "configured_interval": interval, "cp_series_json": "null"}
    overview = _retry(cp.overview)
    config = checkpoint_view.config_view(cp.config_view(), cp.config)
    # the summary window holds (id, metrics) of every completed checkpoint still counted;
    # list() of a deque runs without yielding the GIL, so it is a consistent copy
    completed = list(cp.coordinator.stats.summary)
    tab = checkpoint_view.checkpoints_tab(overview, config, completed)
    return {"checkpoints": tab, "configured_interval": config.interval_ms if config else None,
            "cp_series_json": script_json(tab.series)}


def checkpoint_detail_context(dispatcher: Dispatcher, jid: str, checkpoint_id: int) -> dict[str, Any]:
    """One checkpoint per vertex and per subtask, for an expanded history row. Raises UnknownJob
    for an unknown job; ``detail`` is None when the checkpoint has left the history."""
    record = load_job(dispatcher, jid)
    cp = dispatcher.checkpointing(record.jid)
    if cp is None:
        raise UnknownJob(jid)
    details = _retry(lambda: cp.details(checkpoint_id))
    detail = None
    if details is not None:
        subtasks = {vid: _retry(lambda vid=vid: cp.subtasks(checkpoint_id, vid)) for vid in details.get("tasks", {})}
        detail = checkpoint_view.checkpoint_detail(details, subtasks, job_views.vertices_of(record))
    return {"jid": record.jid, "checkpoint_id": checkpoint_id, "detail": detail}


def _retry(read: Any, attempts: int = 5) -> Any:
    """The statistics are read while the JobManager's loop updates them; a read that meets
    a concurrent change ("dictionary changed size during iteration") is simply repeated."""
    for i in range(attempts):
        try:
            return read()
        except RuntimeError:
            if i == attempts - 1:
                raise
            time.sleep(0.001)


def script_json(value: Any) -> str:
    """JSON safe to put inside a <script> element: a name holding "</script>" cannot end it."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def throughput_series(history: ThroughputHistory, record: JobRecord) -> dict[str, Any]:
    names = {v["id"]: v["name"] for v in job_views.vertices_of(record)}
    return history.series(record.jid, names)
