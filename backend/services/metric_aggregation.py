"""Flink's metric-query answers, shared by every REST metric endpoint: ``?get=`` values as strings,
the ``?agg=`` aggregations over several components, and the ``?subtasks=`` / ``?taskmanagers=`` /
``?jobs=`` selectors. Pure functions over plain mappings.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

AGGREGATIONS = ("min", "max", "avg", "sum", "skew")
MAX_SELECTED = 100_000  # subtask indices one ``subtasks=`` may name, ranges included


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def values_answer(values: Mapping[str, Any], names: Sequence[str]) -> list[dict[str, str]]:
    """One component's metrics: ``[{id}]`` (what is available) without ``names``, else ``[{id, value}]``
    for the names it reports, values as strings as Flink answers; unknown names are left out."""
    present = {k: v for k, v in values.items() if v is not None}
    if not names:
        return [{"id": k} for k in sorted(present)]
    return [{"id": n, "value": str(present[n])} for n in dict.fromkeys(names) if n in present]


def aggregate(samples: Iterable[Mapping[str, Any]], names: Sequence[str], aggs: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Several components' metrics: ``[{id}]`` for the numeric metrics any reports without ``names``,
    else ``[{id, <agg>...}]`` with only the requested aggregations (all of them when none is given),
    for each name at least one component reports. Raises ValueError for an unknown aggregation."""
    samples = list(samples)
    if not names:
        return [{"id": k} for k in sorted({k for m in samples for k, v in m.items() if is_number(v)})]
    wanted = [a.lower() for a in aggs] or list(AGGREGATIONS)
    bad = [a for a in wanted if a not in AGGREGATIONS]
    if bad:
        raise ValueError(f"unknown aggregation {bad[0]!r}; expected one of {', '.join(AGGREGATIONS)}")
    out = []
    for name in dict.fromkeys(names):
        values = [m[name] for m in samples if is_number(m.get(name))]
        if not values:
            continue
        avg = sum(values) / len(values)
        computed = {"min": min(values), "max": max(values), "sum": sum(values), "avg": avg, "skew": skew(values, avg)}
        out.append({"id": name, **{a: float(computed[a]) for a in AGGREGATIONS if a in wanted}})
    return out


def skew(values: Sequence[float], avg: float) -> float:
    """Flink's data skew, in percent: the mean absolute deviation over the mean, at most 100; 0 when
    the mean is 0 (values are taken to be non-negative, as Flink takes them)."""
    if not values or avg == 0:
        return 0.0
    deviation = sum(abs(v - avg) for v in values) / len(values)
    return min(deviation / avg * 100.0, 100.0)


def parse_subtasks(text: str | None) -> set[int] | None:
    """``?subtasks=0,2-4``: the indices named (Flink accepts single indices and ranges); None for all.
    Raises ValueError for anything else."""
    if text is None or not text.strip():
        return None
    chosen: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise ValueError(f"bad subtask selection {part!r}: expected an index or a range like 1-3") from None
        if first < 0 or last < first:
            raise ValueError(f"bad subtask selection {part!r}: expected an index or a range like 1-3")
        if last - first + 1 + len(chosen) > MAX_SELECTED:
            raise ValueError(f"subtask selection {part!r} names more than {MAX_SELECTED} subtasks")
        chosen.update(range(first, last + 1))
    return chosen
