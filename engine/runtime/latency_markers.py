"""Latency markers (Flink's LatencyMarker and LatencyStats): end-to-end latency from sources to operators.

With ``metrics.latency.interval`` > 0 every source subtask emits, every interval, a marker carrying the
wall-clock time it was made, its source operator's id and its subtask index. A marker travels in-band
with the records (``LATENCY_MARKER`` buffers, engine/runtime/io/serialization.py) to one randomly chosen
channel of each output, as Flink's ``randomEmit`` does, and so waits in the same buffers and queues as
the records around it; it never enters a user function. Each task that receives one records
``now - marked_time`` for every operator of its chain, then forwards it. Windows and keyed operators
never hold a marker back, so what is measured is the data path (buffering, network, queueing), not how
long a window waits to fire: the same meaning as in Flink.

Histograms are kept per (source operator, operator, operator subtask), Flink's default ``operator``
granularity, over the last ``metrics.latency.history-size`` values (128), and named as Flink's job-scope
metrics: ``latency.source_id.<id>.operator_id.<id>.operator_subtask_index.<n>.latency``.

Pure: time is passed in; no I/O.
"""
from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable

#: Flink's option names (cluster-wide in the JobManager's settings, or per job from the ExecutionConfig).
INTERVAL_OPTION = "metrics.latency.interval"
HISTORY_OPTION = "metrics.latency.history-size"
DEFAULT_HISTORY = 128

#: The statistics a histogram reports, with Flink's REST suffixes (MetricStore's histogram dump).
QUANTILES: tuple[tuple[str, float], ...] = (
    ("median", 0.5), ("p75", 0.75), ("p90", 0.90), ("p95", 0.95), ("p98", 0.98), ("p99", 0.99), ("p999", 0.999),
)
#: Prometheus summary quantiles (Flink's reporter reports these for a histogram).
PROMETHEUS_QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)


@dataclass(frozen=True)
class LatencyMarker:
    """When (epoch ms) and where (source operator id, source subtask) a marker was made."""

    marked_time: int
    source_id: str
    source_subtask: int

    def to_wire(self) -> list[Any]:
        return [self.marked_time, self.source_id, self.source_subtask]

    @classmethod
    def from_wire(cls, wire: Any) -> "LatencyMarker":
        marked, source, subtask = wire
        return cls(int(marked), str(source), int(subtask))


def latency_interval_ms(config: dict[str, Any]) -> int:
    """The job's marker interval: 0 (off, Flink's default) unless set to a positive number of ms."""
    try:
        value = int(config.get(INTERVAL_OPTION) or 0)
    except (TypeError, ValueError):
        return 0
    return max(value, 0)


def history_size(config: dict[str, Any]) -> int:
    """How many latencies each histogram keeps (Flink's ``metrics.latency.history-size``, default 128)."""
    try:
        value = int(config.get(HISTORY_OPTION) or DEFAULT_HISTORY)
    except (TypeError, ValueError):
        return DEFAULT_HISTORY
    return min(max(value, 1), 100_000)


def quantile(sorted_values: list[float], q: float) -> float:
    """Flink's DescriptiveStatistics percentile (the default estimation, R-6 / Excel's PERCENTILE.EXC)."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    pos = q * (n + 1)
    if pos < 1:
        return sorted_values[0]
    if pos >= n:
        return sorted_values[-1]
    lower = sorted_values[int(pos) - 1]
    upper = sorted_values[int(pos)]
    return lower + (pos - int(pos)) * (upper - lower)


class LatencyHistogram:
    """The last ``history`` latencies (ms) and how many were ever recorded (Flink's histogram count)."""

    def __init__(self, history: int = DEFAULT_HISTORY) -> None:
        self.values: deque[float] = deque(maxlen=max(1, history))
        self.count = 0

    def update(self, value: float) -> None:
        self.values.append(value)
        self.count += 1

    def statistics(self) -> dict[str, float]:
        """``count, min, max, mean, stddev`` and the quantiles of ``QUANTILES``, over the window."""
        window = sorted(self.values)
        n = len(window)
        if n == 0:
            return {"count": self.count}
        mean = sum(window) / n
        var = sum((v - mean) ** 2 for v in window) / (n - 1) if n > 1 else 0.0
        stats = {"count": self.count, "min": window[0], "max": window[-1], "mean": mean, "stddev": math.sqrt(var)}
        for name, q in QUANTILES:
            stats[name] = quantile(window, q)
        stats["sum"] = sum(window)  # over the window: what a Prometheus summary's _sum reports with _count
        stats["window"] = n
        return stats


def histogram_name(source_id: str, operator_id: str, operator_subtask: int) -> str:
    """Flink's job-scope metric identifier of one latency histogram (operator granularity)."""
    return f"latency.source_id.{source_id}.operator_id.{operator_id}.operator_subtask_index.{operator_subtask}.latency"


class LatencyStats:
    """One task's latency histograms: written by the task thread when a marker arrives (rare: once per
    interval per source subtask), read by the metrics thread; a lock keeps the two apart."""

    def __init__(self, operator_ids: Iterable[str], subtask: int, history: int = DEFAULT_HISTORY) -> None:
        self.operator_ids = tuple(operator_ids)
        self.subtask = subtask
        self.history = history
        self._lock = threading.Lock()
        self._histograms: dict[tuple[str, str], LatencyHistogram] = {}

    def report(self, marker: LatencyMarker, now_ms: int) -> None:
        """Every operator of the chain sees the marker now (chained operators hand it on at once)."""
        latency = max(now_ms - marker.marked_time, 0)
        with self._lock:
            for op in self.operator_ids:
                h = self._histograms.get((marker.source_id, op))
                if h is None:
                    h = self._histograms[(marker.source_id, op)] = LatencyHistogram(self.history)
                h.update(latency)

    def snapshot(self) -> list[list[Any]]:
        """``[source_id, operator_id, operator_subtask, statistics]`` per histogram, msgpack-ready."""
        with self._lock:
            items = [(k, h.statistics()) for k, h in self._histograms.items()]
        return [[src, op, self.subtask, stats] for (src, op), stats in items]


class MarkerSchedule:
    """When a source subtask emits its next marker: every ``interval_ms`` of wall-clock time."""

    def __init__(self, interval_ms: int, source_id: str, subtask: int, now_ms: int) -> None:
        self.interval_ms = interval_ms
        self.source_id = source_id
        self.subtask = subtask
        self.next_ms = now_ms + interval_ms

    def due(self, now_ms: int) -> LatencyMarker | None:
        if now_ms < self.next_ms:
            return None
        # Not catching up on missed intervals: a source that stalled emits one marker, not a burst.
        self.next_ms = now_ms + self.interval_ms
        return LatencyMarker(now_ms, self.source_id, self.subtask)


def rest_values(reports: Iterable[list[Any]]) -> dict[str, float]:
    """Flink's job-scope REST metric ids and values from the tasks' histogram snapshots: for each
    histogram ``<name>_min``, ``_max``, ``_mean``, ``_median``, ``_stddev``, ``_p75`` ... ``_p999``."""
    out: dict[str, float] = {}
    for src, op, subtask, stats in reports:
        if "min" not in stats:
            continue
        name = histogram_name(str(src), str(op), int(subtask))
        for suffix in ("min", "max", "mean", "stddev", *(q for q, _ in QUANTILES)):
            out[f"{name}_{suffix}"] = stats[suffix]
    return out
