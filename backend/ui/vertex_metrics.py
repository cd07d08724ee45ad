"""Per-vertex figures the dashboard shows, folded from the subtasks' metric samples.

Pure functions over the archived vertex shape produced by
``job_views.vertices_of`` (``engine/executiongraph/archived.py``). As in Flink's
graph view, busy and backpressure of a vertex are the worst subtask's.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def num(value: Any) -> float | None:
    """A metric value as float, or None when it is missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@dataclass(frozen=True)
class SubtaskFigures:
    busy: float | None  # 0..1 of the last sampling interval
    idle: float | None
    backpressured: float | None
    rate_in: float | None
    rate_out: float | None
    records_in: float | None
    records_out: float | None
    bytes_in: float | None
    bytes_out: float | None
    watermark: float | None

    @property
    def sampled(self) -> bool:
        return self.busy is not None


def subtask_figures(metrics: Mapping[str, Any] | None) -> SubtaskFigures:
    m = metrics or {}

    def ratio(key: str) -> float | None:
        v = num(m.get(key))
        return None if v is None else v / 1000

    return SubtaskFigures(
        busy=ratio("busyTimeMsPerSecond"),
        idle=ratio("idleTimeMsPerSecond"),
        backpressured=ratio("backPressuredTimeMsPerSecond"),
        rate_in=num(m.get("numRecordsInPerSecond")),
        rate_out=num(m.get("numRecordsOutPerSecond")),
        records_in=num(m.get("read-records")),
        records_out=num(m.get("write-records")),
        bytes_in=num(m.get("read-bytes")),
        bytes_out=num(m.get("write-bytes")),
        watermark=num(m.get("currentInputWatermark")),
    )


@dataclass(frozen=True)
class VertexFigures:
    busy: float | None  # max over subtasks
    backpressured: float | None  # max over subtasks
    rate_in: float | None  # sum over subtasks
    rate_out: float | None
    records_in: float | None
    records_out: float | None
    low_watermark: float | None  # min over subtasks that have one


def _sum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _max(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def vertex_figures(vertex: Mapping[str, Any], live: bool = True) -> VertexFigures:
    """Figures of one archived vertex. Rates and ratios are only meaningful while the
    job runs (``live``); a finished job keeps its counters but shows no rates."""
    subs = [subtask_figures(st.get("metrics")) for st in vertex.get("subtasks", [])]
    wms = [s.watermark for s in subs if s.watermark is not None]
    return VertexFigures(
        busy=_max([s.busy for s in subs]) if live else None,
        backpressured=_max([s.backpressured for s in subs]) if live else None,
        rate_in=_sum([s.rate_in for s in subs]) if live else None,
        rate_out=_sum([s.rate_out for s in subs]) if live else None,
        records_in=_sum([s.records_in for s in subs]),
        records_out=_sum([s.records_out for s in subs]),
        low_watermark=min(wms) if wms else None,
    )


def vertex_colour(busy: float | None, backpressured: float | None) -> str:
    """Flink's node colouring: blue when idle, shading to red as busy grows, and to
    grey then black as backpressure grows (backpressure wins when it dominates,
    because a backpressured vertex is waiting, not working)."""
    if busy is None and backpressured is None:
        return "hsl(210, 15%, 55%)"  # no sample yet: a muted blue-grey
    b = min(max(busy or 0.0, 0.0), 1.0)
    bp = min(max(backpressured or 0.0, 0.0), 1.0)
    if bp > 0.10 and bp >= b:
        lightness = round(60 - 50 * bp)  # 0.1 -> 55% grey, 1.0 -> 10% near-black
        return f"hsl(0, 0%, {lightness}%)"
    # 210 (blue) up through violet to 360 (red): going the short way down through
    # green would suggest "healthy" for a half-busy vertex.
    hue = round(210 + 150 * b) % 360
    return f"hsl({hue}, 65%, 45%)"
