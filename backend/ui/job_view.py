"""View models of the job page's header and of its table-shaped tabs (Subtasks,
Watermarks, Timeline, Exceptions, Configuration).

Everything is computed from the REST service functions in
``millstream.backend.services.job_views``; nothing here does I/O.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from millstream.backend.services import job_views
from millstream.backend.ui.vertex_metrics import SubtaskFigures, subtask_figures
from millstream.engine.jobmanager.job_store import ExceptionRecord, JobRecord

TABS = (
    ("graph", "Graph"),
    ("subtasks", "Subtasks"),
    ("spark", "Spark"),
    ("backpressure", "Backpressure"),
    ("checkpoints", "Checkpoints"),
    ("savepoints", "Savepoints"),
    ("exceptions", "Exceptions"),
    ("output", "Output"),
    ("watermarks", "Watermarks"),
    ("timeline", "Timeline"),
    ("throughput", "Throughput"),
    ("flamegraph", "Flame Graph"),
    ("configuration", "Configuration"),
)
TAB_IDS = frozenset(t for t, _ in TABS)
# Tabs whose body changes while the job runs. The others hold things a reader
# opens or scrolls (stack traces, config): re-rendering them would fight the reader.
LIVE_TABS = frozenset({"graph", "subtasks", "spark", "backpressure", "watermarks", "timeline"})
_BATCH_ONLY_TABS = frozenset({"spark"})
# A bounded job takes no checkpoints or savepoints and has no watermarks to follow (event time ends
# at once); on Spark there are no channels to be backpressured or sampled for throughput either.
_NOT_FOR_BATCH = frozenset({"checkpoints", "savepoints", "watermarks"})
_NOT_ON_SPARK = _NOT_FOR_BATCH | {"backpressure", "throughput", "flamegraph"}
_TIMELINE_STATES = ("CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING", "CANCELING")


def tabs_for(job_type: str, on_spark: bool = False, has_output: bool = False) -> tuple[tuple[str, str], ...]:
    """The tabs the job page offers, only those that can mean something for the job: the Spark tab for
    a BATCH job on Spark, none of the streaming ones for a BATCH job, Output when Millstream holds
    print() output of the job. (Every tab's address still answers, with its honest empty state, for
    links kept from elsewhere.)"""
    if not has_output:
        return tuple(t for t in tabs_for(job_type, on_spark, True) if t[0] != "output")
    if job_type != "BATCH":
        hidden = _BATCH_ONLY_TABS
    elif on_spark:
        hidden = _NOT_ON_SPARK
    else:
        hidden = _NOT_FOR_BATCH | _BATCH_ONLY_TABS
    return tuple(t for t in TABS if t[0] not in hidden)


@dataclass(frozen=True)
class JobHeader:
    jid: str
    name: str
    state: str
    job_type: str
    start_time: int
    duration: int
    task_counts: dict[str, int]  # only states with at least one task
    status_message: str | None
    alive: bool


def job_header(record: JobRecord, now: int, status_message: str | None) -> JobHeader:
    d = job_views.job_detail(record, now)
    return JobHeader(
        jid=d["jid"],
        name=d["name"],
        state=d["state"],
        job_type=d["job-type"],
        start_time=d["start-time"],
        duration=d["duration"],
        task_counts={s: n for s, n in d["status-counts"].items() if n},
        status_message=status_message,
        alive=not job_views.is_terminal(record),
    )


@dataclass(frozen=True)
class SubtaskRow:
    subtask: int
    state: str
    attempt: int
    taskmanager: str
    endpoint: str
    slot: int | None
    duration: int
    figures: SubtaskFigures


SUBTASK_PAGE_ROWS = 200  # per vertex: a vertex at parallelism 32768 made a 30 MB page taking 9 s


@dataclass(frozen=True)
class VertexSubtasks:
    id: str
    name: str
    parallelism: int
    rows: tuple[SubtaskRow, ...]
    total: int = 0  # subtasks of the vertex, of which ``rows`` is page ``page`` of ``pages``
    page: int = 1
    pages: int = 1


def subtasks_tab(record: JobRecord, now: int, hosts: Mapping[str, str], page: int = 1) -> list[VertexSubtasks]:
    """Per vertex, the REST subtask rows joined with the slot and live ratios from the archive;
    page ``page`` of ``SUBTASK_PAGE_ROWS`` rows (the same page of every vertex, clamped to its last)."""
    out = []
    live = not job_views.is_terminal(record)
    for v in job_views.vertices_of(record):
        total = len(v.get("subtasks", []))
        pages = max(1, -(-total // SUBTASK_PAGE_ROWS))
        shown = min(max(page, 1), pages)
        offset = (shown - 1) * SUBTASK_PAGE_ROWS
        detail = job_views.vertex_detail(record, v["id"], now, hosts, offset, SUBTASK_PAGE_ROWS)
        archived = {
            st["subtask"]: st for st in job_views.subtask_page(v.get("subtasks", []), offset, SUBTASK_PAGE_ROWS)
        }
        rows = []
        for st in detail["subtasks"]:
            raw = archived.get(st["subtask"], {})
            figures = subtask_figures(raw.get("metrics"))
            if not live:  # ratios and rates describe the last second of a running task only
                figures = SubtaskFigures(None, None, None, None, None, figures.records_in, figures.records_out,
                                         figures.bytes_in, figures.bytes_out, figures.watermark)
            rows.append(
                SubtaskRow(
                    subtask=st["subtask"],
                    state=st["status"],
                    attempt=st["attempt"],
                    taskmanager=st["taskmanager-id"],
                    endpoint=st["endpoint"],
                    slot=raw.get("slot"),
                    duration=st["duration"],
                    figures=figures,
                )
            )
        out.append(VertexSubtasks(v["id"], v["name"], int(v["parallelism"]), tuple(rows), total, shown, pages))
    return out


@dataclass(frozen=True)
class Segment:
    state: str
    start: int
    end: int
    left_pct: float
    width_pct: float


@dataclass(frozen=True)
class TimelineRow:
    vertex: str
    subtask: int
    segments: tuple[Segment, ...]


def timeline_segments(
    timestamps: Mapping[str, int], status: str, now: int, span: tuple[int, int]
) -> tuple[Segment, ...]:
    """A subtask's states as consecutive segments, placed as percentages of ``span``.
    A state lasts until the next state that was entered; the current one until ``now``
    (or, if terminal, is drawn as a thin end marker)."""
    entered = sorted((t, s) for s, t in timestamps.items() if t and t > 0)
    lo, hi = span
    width = max(hi - lo, 1)
    segs = []
    for i, (t, s) in enumerate(entered):
        end = entered[i + 1][0] if i + 1 < len(entered) else (now if s in _TIMELINE_STATES else t)
        segs.append(Segment(s, t, end, 100 * (t - lo) / width, max(100 * (end - t) / width, 0.4)))
    return tuple(segs)


def timeline_span(rows: Sequence[TimelineRow]) -> tuple[int, int] | None:
    """The first and last instants drawn, for the axis under the bars."""
    segs = [s for r in rows for s in r.segments]
    return (min(s.start for s in segs), max(s.end for s in segs)) if segs else None


def timeline_tab(record: JobRecord, now: int) -> list[TimelineRow]:
    rows_src = []
    for v in job_views.vertices_of(record):
        times = job_views.vertex_subtasktimes(record, v["id"], now)
        status = {st["subtask"]: st["status"] for st in v.get("subtasks", [])}
        for st in times["subtasks"]:
            rows_src.append((v["name"], st["subtask"], st["timestamps"], status.get(st["subtask"], "CREATED")))
    firsts = [t for _, _, ts, _ in rows_src for t in ts.values() if t > 0]
    if not firsts:
        return []
    # an ended job's bars stop at its last task transition, not at the job's end time
    end = now if not job_views.is_terminal(record) else max(firsts)
    span = (min(firsts), max(end, max(firsts)))
    return [TimelineRow(name, sub, timeline_segments(ts, status, end, span)) for name, sub, ts, status in rows_src]


@dataclass(frozen=True)
class WatermarkRow:
    vertex: str
    subtask: int
    watermark: int


def watermarks_tab(record: JobRecord) -> list[tuple[str, str, list[WatermarkRow]]]:
    """(vertex id, name, rows) per vertex; rows are empty while it has no watermark."""
    out = []
    for v in job_views.vertices_of(record):
        rows = [
            WatermarkRow(v["name"], int(e["id"].split(".", 1)[0]), int(e["value"]))
            for e in job_views.vertex_watermarks(record, v["id"])
        ]
        out.append((v["id"], v["name"], rows))
    return out


@dataclass(frozen=True)
class ExceptionRow:
    timestamp: int
    name: str
    task: str | None
    attempt: int | None
    taskmanager: str | None
    stacktrace: str


def exceptions_tab(
    rows: Sequence[ExceptionRecord], limit: int, failure_cause: str | None
) -> tuple[list[ExceptionRow], bool, str | None]:
    """(entries, truncated, root cause when nothing was recorded). ``rows`` should hold
    one more than ``limit`` so truncation is known. The attempt comes from the record:
    Flink's REST entry has no attempt field."""
    rest = job_views.exceptions(rows, limit, failure_cause)
    entries = [
        ExceptionRow(
            timestamp=e["timestamp"],
            name=e["exceptionName"],
            task=e["taskName"],
            attempt=r.attempt,
            taskmanager=e["taskManagerId"],
            stacktrace=e["stacktrace"],
        )
        for e, r in zip(rest["exceptionHistory"]["entries"], rows)
    ]
    root = None if entries else rest["root-exception"]
    return entries, rest["truncated"], root


def configuration_tab(record: JobRecord) -> dict[str, Any]:
    """The REST config plus the JobGraph's configuration as Flink lists it: one dotted key per value."""
    conf = job_views.job_config(record)
    raw = record.job_graph.get("config") or {}
    return {"execution": conf["execution-config"], "raw": sorted(_config_entries("", raw))}


def _config_entries(prefix: str, value: Any) -> list[tuple[str, str]]:
    """Nested settings (a checkpoint config, a restart strategy) become ``a.b.c`` keys, and values
    are written as Flink writes them (``true``, ``a;b``), never as Python reprs."""
    if isinstance(value, dict):
        if not value and prefix:
            return [(prefix, "(empty)")]
        out: list[tuple[str, str]] = []
        for k, v in value.items():
            out += _config_entries(f"{prefix}.{k}" if prefix else str(k), v)
        return out
    return [(prefix, _config_value(value))]


def _config_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(none)"
    if isinstance(value, (list, tuple)):
        return ";".join(_config_value(v) for v in value)
    return str(value)
