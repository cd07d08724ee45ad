"""Per-subtask I/O metrics and Flink's busy / idle / backpressured time accounting.

The task loop adds seconds to ``idle_s`` while waiting for input and the
record writers add to ``backpressured_s`` while waiting for credit; the rest
of the wall time is busy. ``sample`` turns the counters into per-second rates, and adds the user
metrics that the task's functions registered (``millstream.engine.metrics``), under their identifiers.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from millstream.engine.metrics.groups import MetricRegistry, UserMetricValue


#: The key of a task's latency histograms in its metrics sample (job-scope metrics, not the task's own).
LATENCY_FIGURE = "latencyHistograms"


def backpressure_level(ratio: float) -> str:
    """Flink's thresholds: ok <= 0.10 < low <= 0.5 < high."""
    if ratio <= 0.10:
        return "ok"
    if ratio <= 0.5:
        return "low"
    return "high"


@dataclass
class TaskIOMetrics:
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    idle_s: float = 0.0
    backpressured_s: float = 0.0
    started: float = field(default_factory=time.monotonic)
    late_records_dropped: int = 0
    late_records_dropped_by_operator: dict[str, int] = field(default_factory=dict)  # Flink's is operator-scoped
    current_input_watermark: int | None = None
    current_output_watermark: int | None = None
    latency: Any = None  # the task's LatencyStats while latency tracking is on
    user_metrics: MetricRegistry = field(default_factory=MetricRegistry)
    # The user metrics as of the last sample, with their kinds, for the TaskManager's Prometheus endpoint:
    # sampling twice would take a meter's rate twice.
    last_user_metrics: list[UserMetricValue] = field(default_factory=list)
    # the previous sample, to compute per-second figures over the last interval
    _last: tuple[float, float, float, int, int] | None = None

    def count_late(self, operator_name: str) -> None:
        """A late record was dropped by ``operator_name`` (it had no side output for late data)."""
        self.late_records_dropped += 1
        by_op = self.late_records_dropped_by_operator
        by_op[operator_name] = by_op.get(operator_name, 0) + 1

    def late_dropped_snapshot(self) -> tuple[tuple[str, int], ...]:
        """``(operator, count)`` pairs, read from another thread than the one counting."""
        while True:
            try:
                return tuple(self.late_records_dropped_by_operator.items())
            except RuntimeError:  # the task thread added an operator meanwhile: read again
                continue

    def sample(self, now: float | None = None, blocked_since: float | None = None) -> dict[str, Any]:
        """Figures since the previous sample. ``blocked_since`` counts a credit wait still in progress."""
        now = time.monotonic() if now is None else now
        ongoing_bp = max(now - blocked_since, 0.0) if blocked_since is not None else 0.0
        if self._last is None:
            self._last = (self.started, 0.0, 0.0, 0, 0)
        t0, idle0, bp0, rin0, rout0 = self._last
        total_bp = self.backpressured_s + ongoing_bp
        wall = max(now - t0, 1e-6)
        idle = min(max(self.idle_s - idle0, 0.0), wall)
        bp = min(max(total_bp - bp0, 0.0), wall - idle)
        busy = max(wall - idle - bp, 0.0)
        self._last = (now, self.idle_s, total_bp, self.records_in, self.records_out)
        self.last_user_metrics = self.user_metrics.snapshot(now)
        # first: a user metric never hides a built-in one
        figures: dict[str, Any] = {v.identifier: v.rest_value() for v in self.last_user_metrics}
        figures.update({
            "read-records": self.records_in,
            "write-records": self.records_out,
            "read-bytes": self.bytes_in,
            "write-bytes": self.bytes_out,
            "idleTimeMsPerSecond": round(1000 * idle / wall),
            "backPressuredTimeMsPerSecond": round(1000 * bp / wall),
            "busyTimeMsPerSecond": round(1000 * busy / wall),
            "accumulated-idle-time": round(1000 * self.idle_s),
            "accumulated-backpressured-time": round(1000 * total_bp),
            "accumulated-busy-time": round(1000 * max(now - self.started - self.idle_s - total_bp, 0.0)),
            "numRecordsInPerSecond": (self.records_in - rin0) / wall,
            "numRecordsOutPerSecond": (self.records_out - rout0) / wall,
            "numLateRecordsDropped": self.late_records_dropped,
            "currentInputWatermark": self.current_input_watermark,
            "currentOutputWatermark": self.current_output_watermark,
        })
        if self.latency is not None:
            figures[LATENCY_FIGURE] = self.latency.snapshot()
        return figures
