"""The job page's latency-marker table: one row per source, operator and operator subtask, from the
histograms the tasks report (engine/runtime/latency_markers.py), with operators shown by name."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping


@dataclass(frozen=True)
class LatencyRow:
    source: str
    operator: str
    subtask: int
    p50: float
    p99: float
    max: float
    count: int


def operator_names(job_graph: Mapping[str, Any]) -> dict[str, str]:
    """Operator id -> its display name, from the job graph as stored with the job."""
    return {
        str(o.get("operator_id")): str(o.get("name"))
        for v in job_graph.get("vertices") or [] for o in v.get("operators") or []
    }


def latency_rows(histograms: Iterable[list[Any]], names: Mapping[str, str]) -> list[LatencyRow]:
    rows = [
        LatencyRow(
            names.get(str(src), str(src)), names.get(str(op), str(op)), int(subtask),
            float(stats["median"]), float(stats["p99"]), float(stats["max"]), int(stats.get("count", 0)),
        )
        for src, op, subtask, stats in histograms
        if "median" in stats
    ]
    return sorted(rows, key=lambda r: (r.source, r.operator, r.subtask))
