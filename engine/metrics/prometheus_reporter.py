"""Flink's PrometheusReporter naming: metric families for the JobManager and a TaskManager.

A name is ``flink_`` + the logical scope (``jobmanager``, ``jobmanager_job``, ``taskmanager_job_task``,
``taskmanager_job_task_operator``) + user groups + the metric name, every character outside
``[a-zA-Z0-9:_]`` replaced by ``_``. The scope's variables become labels named as Flink's variables
without brackets (``host``, ``tm_id``, ``job_id``, ``job_name``, ``task_id``, ``task_name``,
``task_attempt_id``, ``task_attempt_num``, ``subtask_index``, ``operator_id``, ``operator_name``); a user key-value group
(``add_group("kind", "even")``) adds its key to the name and a label ``kind="even"``. Label values are
filtered as Flink's reporter does by default (``filterLabelValueCharacters``): every character outside
``[a-zA-Z0-9:_]`` becomes ``_``, so ``Source: numbers -> Map`` is ``Source:_numbers____Map``. As Flink's reporter does, counters,
meters and gauges are all Prometheus gauges (a Flink counter may go down). A distribution (PyFlink's)
is a summary with ``_count`` and ``_sum``, plus ``_min`` and ``_max`` gauges. A latency-marker histogram
(job scope on the TaskManager, engine/runtime/latency_markers.py) is a summary with Flink's reporter's
quantiles (0.5 ... 0.999), ``_count`` and ``_sum``, its key groups (``source_id``, ``operator_id``,
``operator_subtask_index``) in the name and as labels.

Pure: builds ``prometheus_client`` metric families from values; collectors call it at scrape time.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily

from millstream.engine.runtime.latency_markers import PROMETHEUS_QUANTILES, QUANTILES
from millstream.engine.runtime.task_metrics import LATENCY_FIGURE

from millstream.engine.metrics.task_report import TaskMetricsReport
from millstream.engine.metrics.taskmanager_metrics import taskmanager_values

JOBMANAGER_SCOPE = ("jobmanager",)
TASKMANAGER_SCOPE = ("taskmanager",)
JOB_SCOPE = ("jobmanager", "job")
TASK_SCOPE = ("taskmanager", "job", "task")
OPERATOR_SCOPE = ("taskmanager", "job", "task", "operator")
TM_JOB_SCOPE = ("taskmanager", "job")

JOBMANAGER_LABELS = ("host",)
TASKMANAGER_LABELS = ("host", "tm_id")
JOB_LABELS = ("job_id", "job_name", "host")
TASK_LABELS = (
    "job_id", "job_name", "task_id", "task_name", "task_attempt_id", "task_attempt_num", "subtask_index", "tm_id", "host",
)
OPERATOR_LABELS = (*TASK_LABELS, "operator_id", "operator_name")
#: A latency histogram (job scope on the TaskManager) with its key groups as labels, as Flink's reporter names it.
LATENCY_NAME = ("latency", "source_id", "operator_id", "operator_subtask_index", "latency")
LATENCY_LABELS = ("job_id", "job_name", "tm_id", "host", "source_id", "operator_id", "operator_subtask_index")
_QUANTILE_KEY = {q: name for name, q in QUANTILES}

#: Flink's task-scope metric name <- the key of that figure in a task's metrics sample.
TASK_METRICS: dict[str, str] = {
    "numRecordsIn": "read-records",
    "numRecordsOut": "write-records",
    "numBytesIn": "read-bytes",
    "numBytesOut": "write-bytes",
    "numRecordsInPerSecond": "numRecordsInPerSecond",
    "numRecordsOutPerSecond": "numRecordsOutPerSecond",
    "busyTimeMsPerSecond": "busyTimeMsPerSecond",
    "backPressuredTimeMsPerSecond": "backPressuredTimeMsPerSecond",
    "idleTimeMsPerSecond": "idleTimeMsPerSecond",
    "accumulateBusyTimeMs": "accumulated-busy-time",
    "accumulateBackPressuredTimeMs": "accumulated-backpressured-time",
    "accumulateIdleTimeMs": "accumulated-idle-time",
    "currentInputWatermark": "currentInputWatermark",
    "currentOutputWatermark": "currentOutputWatermark",
}

_INVALID = re.compile(r"[^a-zA-Z0-9:_]")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]")


def sanitize(part: str) -> str:
    """One name component as Flink's reporter writes it."""
    return _INVALID.sub("_", part)


def metric_name(scope: Sequence[str], *parts: str) -> str:
    return "_".join(sanitize(p) for p in ("flink", *scope, *parts))


def label_value(value: str) -> str:
    return _INVALID.sub("_", value)


def label_name(key: str) -> str:
    """A user variable's label name: Prometheus's label alphabet, never a leading digit or the
    reserved ``__`` prefix."""
    name = _INVALID_LABEL.sub("_", key).lstrip("_") or "key"
    return f"_{name}" if name[0].isdigit() else name


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)  # Flink's reporter reports a boolean gauge as 1/0
    if isinstance(value, (int, float)):
        return float(value)
    return None  # a text gauge has no Prometheus value; Flink's reporter skips it too


def _help(name: str, scope: Sequence[str]) -> str:
    """Flink's reporter's help text: the metric's name within its scope, and the scope."""
    prefix = metric_name(scope) + "_"
    return f"{name[len(prefix):] if name.startswith(prefix) else name} (scope: {'_'.join(scope)})"


class _Families:
    """Families by name, so two sources of the same name add samples to one family rather than
    producing a duplicate the Prometheus parser would refuse; a clash of kinds keeps the first."""

    def __init__(self) -> None:
        self._by_name: dict[str, Metric] = {}

    def gauge(self, name: str, scope: Sequence[str], labels: Sequence[str], values: Sequence[str], value: float) -> None:
        family = self._by_name.get(name)
        if family is None:
            family = GaugeMetricFamily(name, _help(name, scope), labels=labels)
            self._by_name[name] = family
        if isinstance(family, GaugeMetricFamily) and tuple(family._labelnames) == tuple(labels):
            family.add_metric([label_value(v) for v in values], value)

    def summary(
        self, name: str, scope: Sequence[str], labels: Sequence[str], values: Sequence[str], count: float, total: float
    ) -> None:
        family = self._by_name.get(name)
        if family is None:
            family = SummaryMetricFamily(name, _help(name, scope), labels=labels)
            self._by_name[name] = family
        if isinstance(family, SummaryMetricFamily) and tuple(family._labelnames) == tuple(labels):
            family.add_metric([label_value(v) for v in values], count, total)

    def quantiles(
        self, name: str, scope: Sequence[str], labels: Sequence[str], values: Sequence[str], stats: Mapping[str, Any]
    ) -> None:
        """A Flink histogram as Flink's reporter shows it: a summary with quantiles, ``_count`` and ``_sum``."""
        family = self._by_name.get(name)
        if family is None:
            family = Metric(name, _help(name, scope), "summary")
            self._by_name[name] = family
        if family.type != "summary":
            return
        base = dict(zip(labels, (label_value(v) for v in values)))
        for q in PROMETHEUS_QUANTILES:
            family.add_sample(name, {**base, "quantile": str(q)}, float(stats[_QUANTILE_KEY[q]]))
        family.add_sample(name + "_count", base, float(stats.get("count", 0)))
        family.add_sample(name + "_sum", base, float(stats.get("sum", 0.0)))

    def all(self) -> list[Metric]:
        return list(self._by_name.values())


def jobmanager_families(values: Mapping[str, float], jobs: Iterable[tuple[str, str, Mapping[str, float]]], host: str) -> list[Metric]:
    """The JobManager's ``/metrics``: cluster figures, then each job's as ``(job_id, job_name, values)``."""
    out = _Families()
    for name, value in values.items():
        out.gauge(metric_name(JOBMANAGER_SCOPE, name), JOBMANAGER_SCOPE, JOBMANAGER_LABELS, (host,), float(value))
    for job_id, job_name, job_values in jobs:
        for name, value in job_values.items():
            out.gauge(metric_name(JOB_SCOPE, name), JOB_SCOPE, JOB_LABELS, (job_id, job_name, host), float(value))
    return out.all()


DATA_SERVER_LABELS = ("host", "server", "address")


def data_server_families(servers: Iterable[tuple[int, str, bool]], host: str) -> list[Metric]:
    """Millstream's ``flink_jobmanager_dataServer_up``: 1 while data server ``server`` (its index in
    MILLSTREAM_DATA_REDIS_URLS; ``address`` is host:port/db) answers the leader's PING, 0 while it is
    down; a server not checked yet has no sample. As Prometheus's own ``up``."""
    out = _Families()
    for index, address, up in servers:
        out.gauge(metric_name(JOBMANAGER_SCOPE, "dataServer", "up"), JOBMANAGER_SCOPE, DATA_SERVER_LABELS,
                  (host, str(index), address), 1.0 if up else 0.0)
    return out.all()


def task_families(
    reports: Iterable[TaskMetricsReport], tm_id: str, host: str, status: Mapping[str, Any] | None = None
) -> list[Metric]:
    """A TaskManager's ``/metrics``: its own figures (``status``, as sent with its last heartbeat),
    then every live subtask's task-scope figures and its operators' metrics."""
    out = _Families()
    for name, value in taskmanager_values(status or {}).items():
        if (number := _number(value)) is not None:
            out.gauge(metric_name(TASKMANAGER_SCOPE, *name.split(".")), TASKMANAGER_SCOPE, TASKMANAGER_LABELS,
                      (host, tm_id), number)
    for r in reports:
        task_labels = (
            r.job_id, r.job_name, r.vertex_id, r.task_name, r.attempt_id, str(r.attempt), str(r.subtask), tm_id, host,
        )
        for name, key in TASK_METRICS.items():
            value = _number(r.figures.get(key))
            if value is not None:
                out.gauge(metric_name(TASK_SCOPE, name), TASK_SCOPE, TASK_LABELS, task_labels, value)
        for entry in r.figures.get(LATENCY_FIGURE) or ():
            source_id, operator_id, operator_subtask, stats = entry
            if isinstance(stats, Mapping) and "median" in stats:
                out.quantiles(
                    metric_name(TM_JOB_SCOPE, *LATENCY_NAME), TM_JOB_SCOPE, LATENCY_LABELS,
                    (r.job_id, r.job_name, tm_id, host, str(source_id), str(operator_id), str(operator_subtask)), stats,
                )
        for operator, dropped in r.late_dropped_by_operator:
            out.gauge(
                metric_name(OPERATOR_SCOPE, "numLateRecordsDropped"), OPERATOR_SCOPE, OPERATOR_LABELS,
                (*task_labels, r.operator_id(operator), operator), float(dropped),
            )
        for m in r.user_metrics:
            operator, parts = m.path[0], m.path[1:]
            if not parts:
                continue
            # User variables after the scope's; one that would shadow a scope label is left out.
            extra = {label_name(k): v for k, v in m.variables}
            extra = {k: v for k, v in extra.items() if k not in OPERATOR_LABELS}
            names = (*OPERATOR_LABELS, *extra)
            labels = (*task_labels, r.operator_id(operator), operator, *extra.values())
            name = metric_name(OPERATOR_SCOPE, *parts)
            if m.kind == "distribution":
                count, total, lo, hi = m.value
                out.summary(name, OPERATOR_SCOPE, names, labels, float(count), float(total))
                for suffix, v in (("min", lo), ("max", hi)):
                    if (number := _number(v)) is not None:
                        out.gauge(f"{name}_{suffix}", OPERATOR_SCOPE, names, labels, number)
            elif (number := _number(m.value)) is not None:
                out.gauge(name, OPERATOR_SCOPE, names, labels, number)
    return out.all()
