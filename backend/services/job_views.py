"""Flink's REST shapes for jobs, vertices and subtasks, computed from ``JobRecord``s.

Pure functions: no I/O, and the current time is passed in as ``now`` (epoch ms).
Live and finished jobs are both read from the archived per-vertex shape
(``engine/executiongraph/archived.py``), so there is one code path for both.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from typing_extensions import TypedDict

from millstream.engine.executiongraph.restart_backoff import RestartBackoffTimeStrategy
from millstream.engine.executiongraph.states import ExecutionState, JobStatus
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.jobmanager.job_store import ExceptionRecord, JobRecord
from millstream.backend.services.metric_aggregation import AGGREGATIONS, aggregate
from millstream.engine.runtime.task_metrics import backpressure_level

TASK_STATES: tuple[str, ...] = tuple(s.value for s in ExecutionState)
UNASSIGNED = "(unassigned)"  # Flink's endpoint / taskmanager-id for a subtask without a slot

# Lifecycle order, used to find when a state ended: the next state entered after it.
_STATE_ORDER = (
    "CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING", "CANCELING", "FINISHED", "CANCELED", "FAILED"
)
_DURATION_STATES = ("CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING")
_IO_COUNTERS = ("read-bytes", "write-bytes", "read-records", "write-records")
_ACCUMULATED = ("accumulated-backpressured-time", "accumulated-idle-time", "accumulated-busy-time")
_SAMPLE_BOOKKEEPING = frozenset({"attempt", "tm", "slot", "ts"})
_TERMINAL_TASK_STATES = frozenset(s.value for s in ExecutionState if s.is_terminal())


class UnknownVertex(KeyError):
    """The job has no vertex with this id (answered with 404)."""


# -- schemas of the small, fixed shapes (they also document the OpenAPI schema) ----
class JobIdWithStatus(TypedDict):
    id: str
    status: str


class JobsList(TypedDict):
    jobs: list[JobIdWithStatus]


JobOverview = TypedDict(
    "JobOverview",
    {
        "jid": str,
        "name": str,
        "state": str,
        "start-time": int,
        "end-time": int,
        "duration": int,
        "last-modification": int,
        "tasks": dict[str, int],
    },
)


class JobsOverview(TypedDict):
    jobs: list[JobOverview]


# -- jobs ---------------------------------------------------------------------------
def is_terminal(record: JobRecord) -> bool:
    try:
        return JobStatus(record.state).is_terminal()
    except ValueError:
        return False


def job_duration(record: JobRecord, now: int) -> int:
    end = record.end_time if record.end_time >= 0 else now
    return max(end - record.start_time, 0)


def jobs_list(records: Iterable[JobRecord]) -> JobsList:
    """``GET /jobs``."""
    return {"jobs": [{"id": r.jid, "status": r.state} for r in records]}


def jobs_overview(records: Iterable[JobRecord], now: int) -> JobsOverview:
    """``GET /jobs/overview``. ``tasks`` uses Flink's JobDetails keys: ``total`` plus
    every task state in lowercase (``running``, ``finished``, ...)."""
    return {"jobs": [job_overview(r, now) for r in records]}


def job_overview(record: JobRecord, now: int) -> JobOverview:
    counts = _sum_counts(v["tasks"] for v in vertices_of(record))
    return {
        "jid": record.jid,
        "name": record.name,
        "state": record.state,
        "start-time": record.start_time,
        "end-time": record.end_time if is_terminal(record) else -1,
        "duration": job_duration(record, now),
        "last-modification": record.last_modification or record.start_time,
        "tasks": {"total": sum(counts.values()), **{s.lower(): n for s, n in counts.items()}},
    }


def job_plan(record: JobRecord) -> dict[str, Any]:
    """Flink's plan: ``{jid, name, type, nodes}``."""
    if not record.job_graph:
        return {"jid": record.jid, "name": record.name, "type": record.job_type, "nodes": []}
    return JobGraph.from_dict(record.job_graph).to_plan()


def job_detail(record: JobRecord, now: int) -> dict[str, Any]:
    """``GET /jobs/{jid}``: the job, its state timestamps, plan and per-vertex summary."""
    vertices = [_vertex_summary(v, now, is_terminal(record)) for v in vertices_of(record)]
    return {
        "jid": record.jid,
        "name": record.name,
        "isStoppable": False,
        "state": record.state,
        "job-type": record.job_type,
        "start-time": record.start_time,
        "end-time": record.end_time if is_terminal(record) else -1,
        "duration": job_duration(record, now),
        "maxParallelism": _job_max_parallelism(record),
        "now": now,
        "timestamps": {s.value: int(record.timestamps.get(s.value, 0)) for s in JobStatus},
        "vertices": vertices,
        "status-counts": _sum_counts(v["tasks"] for v in vertices),
        "plan": job_plan(record),
    }


def vertices_of(record: JobRecord) -> list[dict[str, Any]]:
    """The archived vertices; for a job that never got an ExecutionGraph, its JobGraph's
    vertices in CREATED with every count 0 and no subtasks."""
    if record.vertices:
        return [{**v, "tasks": {s: int(v.get("tasks", {}).get(s, 0)) for s in TASK_STATES}} for v in record.vertices]
    if not record.job_graph:
        return []
    return [
        {
            "id": v.id,
            "name": v.name,
            "parallelism": v.parallelism,
            "maxParallelism": v.max_parallelism,
            "status": ExecutionState.CREATED.value,
            "tasks": {s: 0 for s in TASK_STATES},
            "subtasks": [],
        }
        for v in JobGraph.from_dict(record.job_graph).vertices
    ]


def find_vertex(record: JobRecord, vid: str) -> dict[str, Any]:
    for v in vertices_of(record):
        if v["id"] == vid:
            return v
    raise UnknownVertex(vid)


def _job_max_parallelism(record: JobRecord) -> int:
    configured = (record.job_graph.get("config") or {}).get("pipeline.max-parallelism")
    try:
        return int(configured) if configured is not None else -1
    except (TypeError, ValueError):
        return -1


def _sum_counts(many: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total = {s: 0 for s in TASK_STATES}
    for counts in many:
        for s in TASK_STATES:
            total[s] += int(counts.get(s, 0))
    return total


def _vertex_summary(v: dict[str, Any], now: int, job_terminal: bool) -> dict[str, Any]:
    subtasks = v.get("subtasks", [])
    start, end, duration = _span(subtasks, now)
    return {
        "id": v["id"],
        "name": v["name"],
        "parallelism": v["parallelism"],
        "maxParallelism": v["maxParallelism"],
        "status": v["status"],
        "start-time": start,
        "end-time": end,
        "duration": duration,
        "tasks": dict(v["tasks"]),
        "metrics": _io_metrics(subtasks, job_terminal),
    }


# -- times ---------------------------------------------------------------------------
def _span(subtasks: Sequence[Mapping[str, Any]], now: int) -> tuple[int, int, int]:
    """Flink's vertex (or TaskManager group) start, end and duration: from the earliest
    deployment; the end is -1 until every subtask has ended."""
    starts = [st["timestamps"].get("DEPLOYING", 0) for st in subtasks]
    starts = [s for s in starts if s > 0]
    if not starts:
        return -1, -1, -1
    start = min(starts)
    if all(st["status"] in _TERMINAL_TASK_STATES for st in subtasks):
        end = max(st["timestamps"].get(st["status"], 0) for st in subtasks)
        return start, end, end - start
    return start, -1, now - start


def _subtask_times(st: Mapping[str, Any], now: int) -> tuple[int, int, int]:
    ts = st.get("timestamps", {})
    start = ts.get("DEPLOYING", 0)
    end = ts.get(st["status"], 0) if st["status"] in _TERMINAL_TASK_STATES else -1
    duration = ((end if end > 0 else now) - start) if start > 0 else -1
    return (start if start > 0 else -1), (end if end > 0 else -1), duration


def _status_duration(st: Mapping[str, Any], now: int) -> dict[str, int]:
    """Flink's ``status-duration``: time spent in each pre-running state and in RUNNING,
    -1 for a state never entered."""
    ts = st.get("timestamps", {})
    out = {}
    for state in _DURATION_STATES:
        began = ts.get(state, 0)
        if state == st["status"]:
            ended = now
        else:
            later = [ts[s] for s in _STATE_ORDER[_STATE_ORDER.index(state) + 1 :] if ts.get(s, 0) > 0]
            ended = min(later) if later else 0
        out[state] = ended - began if began > 0 and ended > 0 else -1
    return out


# -- metrics ---------------------------------------------------------------------------
def _io_metrics(subtasks: Sequence[Mapping[str, Any]], job_terminal: bool) -> dict[str, Any]:
    """Flink's IOMetricsInfo summed over subtasks. ``-complete`` is false while a live
    subtask has not reported a sample yet."""
    complete = job_terminal or all(
        st.get("metrics") or st["status"] in _TERMINAL_TASK_STATES for st in subtasks
    )
    out: dict[str, Any] = {}
    for key in _IO_COUNTERS:
        out[key] = sum(_number(st.get("metrics", {}).get(key)) for st in subtasks)
        out[f"{key}-complete"] = complete
    for key in _ACCUMULATED:
        out[key] = sum(_number(st.get("metrics", {}).get(key)) for st in subtasks)
    return out


def _number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return value


def _endpoint(tm_id: str | None, hosts: Mapping[str, str] | None) -> str:
    if not tm_id:
        return UNASSIGNED
    if hosts and hosts.get(tm_id):
        return hosts[tm_id]
    host, sep, _ = tm_id.rpartition(":")  # TaskManager ids are "<host>:<pid>-<suffix>"
    return host if sep else tm_id


# -- vertices --------------------------------------------------------------------------
def subtask_page(subtasks: Sequence[Any], offset: int = 0, limit: int | None = None) -> Sequence[Any]:
    """The rows ``[offset, offset + limit)`` of a vertex's subtask list: a vertex may have thousands of
    subtasks, so REST and the dashboard page them instead of building every row."""
    return subtasks[offset:] if limit is None else subtasks[offset:offset + limit]


def _page_info(v: Mapping[str, Any], offset: int, limit: int | None) -> dict[str, Any]:
    # A Millstream addition to Flink's shape, only on paged answers, so Flink's own clients see no change.
    return {} if limit is None and offset == 0 else {"subtasks-total": len(v["subtasks"]), "offset": offset}


def vertex_detail(
    record: JobRecord,
    vid: str,
    now: int,
    hosts: Mapping[str, str] | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> dict[str, Any]:
    """``GET /jobs/{jid}/vertices/{vid}``; ``hosts`` maps TaskManager id to host; ``offset``/``limit`` page
    the subtasks."""
    v = find_vertex(record, vid)
    terminal = is_terminal(record)
    subtasks = []
    for st in subtask_page(v["subtasks"], offset, limit):
        start, end, duration = _subtask_times(st, now)
        subtasks.append(
            {
                "subtask": st["subtask"],
                "status": st["status"],
                "attempt": st.get("attempt", 0),
                "endpoint": _endpoint(st.get("taskmanager_id"), hosts),
                "start-time": start,
                "end-time": end,
                "duration": duration,
                "metrics": _io_metrics([st], terminal),
                "taskmanager-id": st.get("taskmanager_id") or UNASSIGNED,
                "status-duration": _status_duration(st, now),
            }
        )
    return {**_vertex_head(v), "now": now, "subtasks": subtasks, **_page_info(v, offset, limit)}


def _vertex_head(v: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": v["id"], "name": v["name"], "parallelism": v["parallelism"], "maxParallelism": v["maxParallelism"]}


def vertex_subtasktimes(
    record: JobRecord,
    vid: str,
    now: int,
    hosts: Mapping[str, str] | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> dict[str, Any]:
    """``GET .../vertices/{vid}/subtasktimes``: when each subtask entered each state (0 if never)."""
    v = find_vertex(record, vid)
    subtasks = []
    for st in subtask_page(v["subtasks"], offset, limit):
        ts = st.get("timestamps", {})
        first = min((t for t in ts.values() if t > 0), default=0)
        end = ts.get(st["status"], now) if st["status"] in _TERMINAL_TASK_STATES else now
        subtasks.append(
            {
                "subtask": st["subtask"],
                "endpoint": _endpoint(st.get("taskmanager_id"), hosts),
                "duration": end - first if first > 0 else -1,
                "timestamps": {s: int(ts.get(s, 0)) for s in TASK_STATES},
            }
        )
    return {"id": v["id"], "name": v["name"], "now": now, "subtasks": subtasks, **_page_info(v, offset, limit)}


def vertex_taskmanagers(
    record: JobRecord, vid: str, now: int, hosts: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``GET .../vertices/{vid}/taskmanagers``: the vertex's subtasks grouped by TaskManager."""
    v = find_vertex(record, vid)
    terminal = is_terminal(record)
    groups: dict[str, list[dict[str, Any]]] = {}
    for st in v["subtasks"]:
        groups.setdefault(st.get("taskmanager_id") or UNASSIGNED, []).append(st)
    taskmanagers = []
    for tm_id, subtasks in groups.items():
        start, end, duration = _span(subtasks, now)
        counts = {s: 0 for s in TASK_STATES}
        for st in subtasks:
            counts[st["status"]] += 1
        taskmanagers.append(
            {
                "endpoint": _endpoint(None if tm_id == UNASSIGNED else tm_id, hosts),
                "status": aggregate_state([st["status"] for st in subtasks]),
                "start-time": start,
                "end-time": end,
                "duration": duration,
                "metrics": _io_metrics(subtasks, terminal),
                "status-counts": counts,
                "taskmanager-id": tm_id,
            }
        )
    return {"id": v["id"], "name": v["name"], "now": now, "taskmanagers": taskmanagers}


def aggregate_state(states: Sequence[str]) -> str:
    """The engine's (Flink's) rule for a group of subtasks: a failure or cancellation
    wins, then all-finished, then the least advanced live state."""
    present = set(states)
    for s in ("FAILED", "CANCELING", "CANCELED"):
        if s in present:
            return s
    if present and present == {"FINISHED"}:
        return "FINISHED"
    for s in ("CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING"):
        if s in present:
            return s
    return "RUNNING" if present else "CREATED"


def is_whole_page(v: Mapping[str, Any], offset: int, limit: int | None) -> bool:
    """Whether the page ``[offset, offset + limit)`` holds every subtask of vertex ``v``."""
    return offset == 0 and (limit is None or limit >= len(v["subtasks"]))


def vertex_backpressure(
    record: JobRecord, vid: str, now: int, offset: int = 0, limit: int | None = None
) -> dict[str, Any]:
    """``GET .../vertices/{vid}/backpressure``, from the subtasks' busy/idle/backpressured
    milliseconds per second. Before any subtask has reported: ``{"status": "deprecated"}``,
    as Flink answers while it has no statistics. The levels and the end timestamp are the whole
    vertex's; ``offset``/``limit`` page the subtask rows (``subtasks-total`` and ``offset`` added
    when the answer is a part)."""
    v = find_vertex(record, vid)
    sampled = [st for st in v["subtasks"] if "backPressuredTimeMsPerSecond" in (st.get("metrics") or {})]
    if not sampled:
        return {"status": "deprecated"}
    worst = max(_number(st["metrics"].get("backPressuredTimeMsPerSecond")) / 1000 for st in sampled)
    subtasks = []
    for st in subtask_page(v["subtasks"], offset, limit):
        m = st.get("metrics") or {}
        if "backPressuredTimeMsPerSecond" not in m:
            continue
        ratio = _number(m.get("backPressuredTimeMsPerSecond")) / 1000
        subtasks.append(
            {
                "subtask": st["subtask"],
                "attempt-number": st.get("attempt", 0),
                "backpressure-level": backpressure_level(ratio),
                "ratio": ratio,
                "idleRatio": _number(m.get("idleTimeMsPerSecond")) / 1000,
                "busyRatio": _number(m.get("busyTimeMsPerSecond")) / 1000,
            }
        )
    level = backpressure_level(worst)
    end = max((int(_number(st["metrics"].get("ts"))) for st in sampled), default=0) or now
    page = {} if is_whole_page(v, offset, limit) else {"subtasks-total": len(v["subtasks"]), "offset": offset}
    return {
        "status": "ok",
        "backpressure-level": level,
        "backpressureLevel": level,
        "end-timestamp": end,
        "subtasks": subtasks,
        **page,
    }


def vertex_watermarks(record: JobRecord, vid: str, offset: int = 0, limit: int | None = None) -> list[dict[str, str]]:
    """``GET .../vertices/{vid}/watermarks``: one entry per subtask that has a watermark, of the
    subtasks ``[offset, offset + limit)``. Values are strings, as in Flink's metric responses."""
    v = find_vertex(record, vid)
    out = []
    for st in subtask_page(v["subtasks"], offset, limit):
        wm = (st.get("metrics") or {}).get("currentInputWatermark")
        if isinstance(wm, (int, float)) and not isinstance(wm, bool):
            out.append({"id": f"{st['subtask']}.currentInputWatermark", "value": str(int(wm))})
    return out


def subtask_metrics_aggregate(
    record: JobRecord, vid: str, names: Sequence[str], aggs: Sequence[str] = (), subtasks: set[int] | None = None,
    offset: int = 0, limit: int | None = None,
) -> list[dict[str, Any]]:
    """``GET .../vertices/{vid}/subtasks/metrics?get=a,b&agg=min,max&subtasks=0-2``.

    Each requested metric that at least one (selected) subtask reports becomes ``{id, <agg>...}``
    with only the requested aggregations (all four when none is given). With no
    names, lists the available metrics as ``[{id}]``, as Flink does.
    Only the subtask rows ``[offset, offset + limit)`` are aggregated (and of them only those
    ``subtasks`` selects), so one answer reads at most ``limit`` subtasks' metrics.
    Raises ValueError for an unknown aggregation."""
    v = find_vertex(record, vid)
    samples = [
        {k: val for k, val in (st.get("metrics") or {}).items() if k not in _SAMPLE_BOOKKEEPING}
        for st in subtask_page(v["subtasks"], offset, limit) if subtasks is None or st["subtask"] in subtasks
    ]
    return aggregate(samples, names, aggs)


# -- exceptions ------------------------------------------------------------------------
def exceptions(
    records: Sequence[ExceptionRecord], max_exceptions: int, failure_cause: str | None = None
) -> dict[str, Any]:
    """``GET /jobs/{jid}/exceptions``: the newest ``max_exceptions`` of ``records``
    (newest first; pass one more than the limit to learn whether the list was cut),
    in Flink's ``exceptionHistory`` shape plus its legacy top-level keys.
    ``failure_cause`` is the root exception when no exception was recorded."""
    shown = list(records[: max(max_exceptions, 0)])
    truncated = len(records) > len(shown)
    entries = [
        {
            "exceptionName": e.exception_name,
            "stacktrace": e.stacktrace,
            "timestamp": e.timestamp,
            "taskName": e.task_name,
            "endpoint": e.endpoint,
            "taskManagerId": e.taskmanager_id,
            "failureLabels": {},
            "concurrentExceptions": [],
        }
        for e in shown
    ]
    newest = records[0] if records else None
    return {
        "root-exception": newest.stacktrace if newest else failure_cause,
        "timestamp": newest.timestamp if newest else None,
        "all-exceptions": [
            {
                "exception": e.stacktrace,
                "task": e.task_name,
                "location": e.endpoint,
                "endpoint": e.endpoint,
                "timestamp": e.timestamp,
                "taskManagerId": e.taskmanager_id,
            }
            for e in shown
        ],
        "truncated": truncated,
        "exceptionHistory": {"entries": entries, "truncated": truncated},
    }


# -- job config and result ---------------------------------------------------------------
def job_config(record: JobRecord) -> dict[str, Any]:
    """``GET /jobs/{jid}/config``, from the configuration the client put in the JobGraph."""
    config = record.job_graph.get("config") or {}
    # The strategy in effect, as Flink's web UI words it: with none set, a checkpointed job gets
    # the fixed-delay fallback, so "what the program set" would say "deactivated" for a job that restarts.
    try:
        restart = RestartBackoffTimeStrategy.from_job_config(config).config.describe()
    except (TypeError, ValueError):  # a record stored before submissions were validated
        restart = "unknown"
    return {
        "jid": record.jid,
        "name": record.name,
        "execution-config": {
            "execution-mode": "PIPELINED",
            "restart-strategy": restart,
            "job-parallelism": int(config.get("parallelism.default", 1)),
            "object-reuse-mode": False,
            "user-config": dict(config.get("pipeline.global-job-parameters") or {}),
        },
    }


_APPLICATION_STATUS = {"FINISHED": "SUCCEEDED", "FAILED": "FAILED", "CANCELED": "CANCELED"}


def execution_result(record: JobRecord, failure: ExceptionRecord | None = None) -> dict[str, Any]:
    """``GET /jobs/{jid}/execution-result``: IN_PROGRESS until the job ends, then the result;
    ``failure`` (the newest exception) describes why a failed job failed."""
    if not is_terminal(record):
        return {"status": {"id": "IN_PROGRESS"}}
    result: dict[str, Any] = {
        "id": record.jid,
        "application-status": _APPLICATION_STATUS.get(record.state, "UNKNOWN"),
        "accumulator-results": {},
        "net-runtime": job_duration(record, record.end_time),
    }
    if record.state == JobStatus.FAILED.value:
        result["failure"] = {
            "class": failure.exception_name if failure else "JobExecutionException",
            "stack-trace": failure.stacktrace if failure else (record.failure_cause or ""),
        }
    return {"status": {"id": "COMPLETED"}, "job-execution-result": result}
