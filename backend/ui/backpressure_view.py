"""The Backpressure tab: per-vertex and per-subtask ratios from the REST service,
and the bottleneck finder.

A bottleneck is the vertex that is busy while something upstream of it is
backpressured: the upstream waits for credit because this vertex cannot keep up.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from millstream.backend.services import job_views
from millstream.engine.jobmanager.job_store import JobRecord
from millstream.engine.runtime.task_metrics import backpressure_level

BUSY_THRESHOLD = 0.5  # a vertex this busy (worst subtask) has no spare capacity
_BACKPRESSURED = 0.10  # Flink's "ok" boundary: above it, the upstream is throttled


@dataclass(frozen=True)
class BackpressureVertex:
    id: str
    name: str
    sampled: bool
    level: str  # ok | low | high, or "no data"
    ratio: float  # worst subtask's backpressured ratio
    busy: float  # worst subtask's busy ratio
    subtasks: tuple[Mapping[str, Any], ...]  # REST rows: subtask, ratio, busyRatio, idleRatio, backpressure-level


@dataclass(frozen=True)
class Bottleneck:
    vertex_id: str
    name: str
    busy: float
    upstream: tuple[str, ...]  # names of the backpressured upstream vertices


def backpressure_vertices(record: JobRecord, now: int) -> list[BackpressureVertex]:
    out = []
    for v in job_views.vertices_of(record):
        bp = job_views.vertex_backpressure(record, v["id"], now)
        if bp.get("status") != "ok":
            out.append(BackpressureVertex(v["id"], v["name"], False, "no data", 0.0, 0.0, ()))
            continue
        subs = tuple(bp["subtasks"])
        ratio = max(s["ratio"] for s in subs)
        busy = max(s["busyRatio"] for s in subs)
        out.append(BackpressureVertex(v["id"], v["name"], True, bp["backpressure-level"], ratio, busy, subs))
    return out


def find_bottleneck(
    vertices: Sequence[BackpressureVertex], edges: Sequence[tuple[str, str]]
) -> Bottleneck | None:
    """The busiest vertex whose direct upstream is backpressured; None when nothing is."""
    by_id = {v.id: v for v in vertices}
    best: Bottleneck | None = None
    for v in vertices:
        if not v.sampled or v.busy < BUSY_THRESHOLD:
            continue
        upstream = [
            by_id[src].name
            for src, dst in edges
            if dst == v.id and src in by_id and by_id[src].sampled and by_id[src].ratio > _BACKPRESSURED
        ]
        if upstream and (best is None or v.busy > best.busy):
            best = Bottleneck(v.id, v.name, v.busy, tuple(upstream))
    return best


def level_of(ratio: float) -> str:
    """Flink's thresholds, re-exported for templates: ok <= 0.10 < low <= 0.5 < high."""
    return backpressure_level(ratio)
