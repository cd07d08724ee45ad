"""PyFlink's user metric API (``pyflink.metrics``): a MetricGroup and the metric kinds it registers.

These are the interfaces user functions program against; ``millstream.engine.metrics.groups`` implements them
for a running subtask, whose values are reported with the task's metrics.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable


class MetricGroup(ABC):
    """A named container of metrics and of further groups, reached from ``RuntimeContext.get_metrics_group()``."""

    @abstractmethod
    def add_group(self, name: str, extra: str | None = None) -> "MetricGroup":
        """A sub-group ``name``; with ``extra``, a key group ``name`` holding a value group ``extra``,
        which is returned (Flink's key-value groups, which also define a user variable)."""

    @abstractmethod
    def counter(self, name: str) -> "Counter":
        """A counter registered under ``name`` in this group."""

    @abstractmethod
    def gauge(self, name: str, obj: Callable[[], Any]) -> None:
        """Report ``obj()`` under ``name`` each time the metrics are reported."""

    @abstractmethod
    def meter(self, name: str, time_span_in_seconds: int = 60) -> "Meter":
        """A meter: events per second averaged over the last ``time_span_in_seconds``."""

    @abstractmethod
    def distribution(self, name: str) -> "Distribution":
        """A distribution of the values given to ``update`` (count, sum, min, max)."""


class Metric(ABC):
    """Base of every metric."""


class Counter(Metric, ABC):
    @abstractmethod
    def inc(self, n: int = 1) -> None:
        """Add ``n`` to the count."""

    @abstractmethod
    def dec(self, n: int = 1) -> None:
        """Subtract ``n`` from the count."""

    @abstractmethod
    def get_count(self) -> int:
        """The current count."""


class Meter(Metric, ABC):
    @abstractmethod
    def mark_event(self, value: int = 1) -> None:
        """Record ``value`` events now."""

    @abstractmethod
    def get_count(self) -> int:
        """Every event marked so far."""


class Distribution(Metric, ABC):
    @abstractmethod
    def update(self, value: int) -> None:
        """Add one observed value."""
