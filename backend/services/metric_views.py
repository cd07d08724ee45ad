"""Flink's metric-query shapes for a vertex and one subtask, from the subtask metrics the tasks report
(their I/O figures and the user metrics their functions registered, e.g. ``Map.my_group.events``).

Pure functions over a ``JobRecord``, like ``job_views``. As in Flink, values are answered as strings
and a metric nobody reports is left out of the answer.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from millstream.backend.services.job_views import UnknownVertex, find_vertex, subtask_page
from millstream.engine.jobmanager.job_store import JobRecord

# Not metrics: where and when the sample was taken; latency histograms are the job's metrics, as in Flink.
_BOOKKEEPING = frozenset({"attempt", "tm", "slot", "ts", "latencyHistograms"})


def _text(value: Any) -> str:
    return str(value)


def _subtask_metrics(subtask: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (subtask.get("metrics") or {}).items() if k not in _BOOKKEEPING and v is not None}


def vertex_metrics(
    record: JobRecord, vid: str, names: Sequence[str], offset: int = 0, limit: int | None = None
) -> list[dict[str, str]]:
    """``GET /jobs/{jid}/vertices/{vid}/metrics``: ids are ``<subtask index>.<metric>``; without
    ``names``, ``[{id}]`` lists what is available, else ``[{id, value}]`` for those reported; both
    only of the subtasks ``[offset, offset + limit)``."""
    by_id: dict[str, Any] = {}
    for st in subtask_page(find_vertex(record, vid)["subtasks"], offset, limit):
        for name, value in _subtask_metrics(st).items():
            by_id[f"{st['subtask']}.{name}"] = value
    if not names:
        return [{"id": k} for k in sorted(by_id)]
    return [{"id": n, "value": _text(by_id[n])} for n in dict.fromkeys(names) if n in by_id]


def subtask_metrics(record: JobRecord, vid: str, index: int, names: Sequence[str]) -> list[dict[str, str]]:
    """``GET /jobs/{jid}/vertices/{vid}/subtasks/{index}/metrics``: the same for one subtask, ids
    without the index. Raises UnknownVertex for an index the vertex does not have."""
    subtask = next((st for st in find_vertex(record, vid)["subtasks"] if st["subtask"] == index), None)
    if subtask is None:
        raise UnknownVertex(f"{vid} subtask {index}")
    metrics = _subtask_metrics(subtask)
    if not names:
        return [{"id": k} for k in sorted(metrics)]
    return [{"id": n, "value": _text(metrics[n])} for n in dict.fromkeys(names) if n in metrics]
