"""The metric groups and metrics of a running subtask, and the registry the task reports them from.

A function's ``get_metrics_group()`` is its operator's group; a metric's identifier is the
operator name, the group names and the metric name joined by dots (``Map.my_group.events``), as
Flink names operator-scoped user metrics in its REST API. ``MetricRegistry.report`` gives every
metric's current value, which the task publishes with its I/O metrics.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from millstream.engine.metrics.metricbase import Counter, Distribution, Meter, Metric, MetricGroup

log = logging.getLogger("millstream.metrics")

OPERATOR_NAME_MAX_LENGTH = 80  # Flink truncates longer operator names in metric identifiers
METER_UPDATE_INTERVAL_S = 5  # Flink's MeterView: time spans are whole multiples of this


class SimpleCounter(Counter):
    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n

    def dec(self, n: int = 1) -> None:
        self.count -= n

    def get_count(self) -> int:
        return self.count


class MeterView(Meter):
    """Events per second over the last ``time_span_s`` (Flink's MeterView: the span is rounded down to
    a multiple of 5 seconds, at least 5; before a whole span has passed, the events so far over it)."""

    def __init__(self, time_span_s: int = 60, clock: Callable[[], float] = time.monotonic) -> None:
        self.time_span_s = max(int(time_span_s) - int(time_span_s) % METER_UPDATE_INTERVAL_S, METER_UPDATE_INTERVAL_S)
        self.count = 0
        self._clock = clock
        self._history: deque[tuple[float, int]] = deque([(clock(), 0)])  # (when, count then)

    def mark_event(self, value: int = 1) -> None:
        self.count += value

    def get_count(self) -> int:
        return self.count

    def get_rate(self, now: float | None = None) -> float:
        """Also records a sample, so call it at a steady pace (the task's metric reports)."""
        now = self._clock() if now is None else now
        count = self.count
        self._history.append((now, count))
        cutoff = now - self.time_span_s
        while len(self._history) > 1 and self._history[1][0] <= cutoff:
            self._history.popleft()
        first_t, first_count = self._history[0]
        baseline = first_count if first_t <= cutoff else 0
        return (count - baseline) / self.time_span_s


class DistributionImpl(Distribution):
    def __init__(self) -> None:
        self.count = 0
        self.sum = 0
        self.min: Any = None
        self.max: Any = None

    def update(self, value: int) -> None:
        self.count += 1
        self.sum += value
        self.min = value if self.min is None or value < self.min else self.min
        self.max = value if self.max is None or value > self.max else self.max

    def value(self) -> str:
        # PyFlink reports a distribution as a gauge of its result; Flink's REST API shows its text.
        return f"DistributionResult{{sum={self.sum}, count={self.count}, min={self.min}, max={self.max}}}"


class GaugeImpl(Metric):
    def __init__(self, obj: Callable[[], Any]) -> None:
        self.obj = obj


@dataclass(frozen=True)
class UserMetricValue:
    """One user metric's value at a report. ``identifier`` is its REST name; ``path`` is its logical
    name as Flink's reporters see it (operator name, groups, metric name, kept apart because a name
    may contain dots), where a key-value group contributes only its key, and ``variables`` holds
    those groups' ``(key, value)`` pairs. ``kind`` is counter, meter, gauge or distribution; a
    distribution's value is ``(count, sum, min, max)``."""

    identifier: str
    path: tuple[str, ...]
    kind: str
    value: Any
    variables: tuple[tuple[str, str], ...] = ()

    def rest_value(self) -> Any:
        """The value as the REST API shows it (a distribution as Flink's DistributionResult text)."""
        if self.kind == "distribution":
            count, total, lo, hi = self.value
            return f"DistributionResult{{sum={total}, count={count}, min={lo}, max={hi}}}"
        return self.value


class MetricRegistry:
    """Every user metric of one subtask by identifier (one registry per task, shared by its chain)."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}
        self._paths: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {}
        self._lock = threading.Lock()  # registered on the task's thread, reported from another
        self._failed_gauges: set[str] = set()

    def operator_group(self, operator_name: str) -> "GenericMetricGroup":
        return GenericMetricGroup(self, (operator_name[:OPERATOR_NAME_MAX_LENGTH],))

    def register(
        self, identifier: str, metric: Metric, path: tuple[str, ...] | None = None,
        variables: tuple[tuple[str, str], ...] = (),
    ) -> Metric:
        """The metric registered under ``identifier``: an earlier one of the same kind is shared (as
        PyFlink shares one cell per name); another kind is refused."""
        with self._lock:
            existing = self._metrics.get(identifier)
            if existing is None:
                self._metrics[identifier] = metric
                self._paths[identifier] = (path or tuple(identifier.split(".")), variables)
                return metric
        if type(existing) is not type(metric):
            raise ValueError(f"metric '{identifier}' is already registered as a {type(existing).__name__}")
        return existing

    def report(self, now: float | None = None) -> dict[str, Any]:
        """``{identifier: value}``: counts, meter rates, gauge values, distribution results."""
        return {v.identifier: v.rest_value() for v in self.snapshot(now)}

    def snapshot(self, now: float | None = None) -> list[UserMetricValue]:
        """Every metric's current value with its kind. A meter's rate is sampled here, so call it at
        a steady pace (once per task metrics report)."""
        with self._lock:
            metrics = [(identifier, m, *self._paths[identifier]) for identifier, m in self._metrics.items()]
        out: list[UserMetricValue] = []
        for identifier, m, path, variables in metrics:
            if isinstance(m, SimpleCounter):
                out.append(UserMetricValue(identifier, path, "counter", m.count, variables))
            elif isinstance(m, MeterView):
                out.append(UserMetricValue(identifier, path, "meter", m.get_rate(now), variables))
            elif isinstance(m, DistributionImpl):
                out.append(UserMetricValue(identifier, path, "distribution", (m.count, m.sum, m.min, m.max), variables))
            elif isinstance(m, GaugeImpl):
                try:
                    value = m.obj()
                except Exception:  # a user gauge that raises is skipped, never fails the task
                    if identifier not in self._failed_gauges:
                        self._failed_gauges.add(identifier)
                        log.warning("gauge %s raised; it is not reported", identifier, exc_info=True)
                    continue
                if value is not None:
                    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
                    out.append(UserMetricValue(identifier, path, "gauge", value if numeric else str(value), variables))
        return out


class GenericMetricGroup(MetricGroup):
    """``scope`` names the group in REST identifiers (every group name and value); ``logical`` and
    ``variables`` name it for reporters, where a key-value group is its key plus a variable."""

    def __init__(
        self, registry: MetricRegistry, scope: tuple[str, ...], logical: tuple[str, ...] | None = None,
        variables: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.registry = registry
        self.scope = scope
        self.logical = scope if logical is None else logical
        self.variables = variables

    def add_group(self, name: str, extra: str | None = None) -> "GenericMetricGroup":
        if extra is None:
            return GenericMetricGroup(self.registry, self.scope + (str(name),), self.logical + (str(name),), self.variables)
        return GenericMetricGroup(
            self.registry, self.scope + (str(name), str(extra)), self.logical + (str(name),),
            self.variables + ((str(name), str(extra)),),
        )

    def _id(self, name: str) -> str:
        return ".".join((*self.scope, str(name)))

    def _register(self, name: str, metric: Metric) -> Any:
        return self.registry.register(self._id(name), metric, (*self.logical, str(name)), self.variables)

    def counter(self, name: str) -> Counter:
        return self._register(name, SimpleCounter())

    def gauge(self, name: str, obj: Callable[[], Any]) -> None:
        if not callable(obj):
            raise TypeError(f"gauge '{name}' needs a callable, got {type(obj).__name__}")
        identifier = self._id(name)
        gauge = self.registry.register(identifier, GaugeImpl(obj), (*self.logical, str(name)), self.variables)
        gauge.obj = obj  # type: ignore[attr-defined]  # the newest callable wins, as re-registering a gauge does in PyFlink

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        return self._register(name, MeterView(time_span_in_seconds))

    def distribution(self, name: str) -> Distribution:
        return self._register(name, DistributionImpl())


class UnregisteredMetricGroup(GenericMetricGroup):
    """A group whose metrics work but are reported nowhere (Flink's UnregisteredMetricsGroup): for
    functions run where no task reports metrics."""

    def __init__(self) -> None:
        super().__init__(MetricRegistry(), ())
