"""The JobManager's metrics read from the Dispatcher's live state: for the Prometheus scrape of
``/metrics``, the REST metric endpoints, and the scrape targets listed at ``/metrics/targets``.

Read at the moment they are asked for (Flink's gauges are, too); nothing runs in the background.
The names and values come from engine/metrics/job_metrics.py, the Prometheus families from
engine/metrics/prometheus_reporter.py.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from millstream.backend.services.process_metrics import jobmanager_process_values
from millstream.engine.executiongraph.states import JobStatus
from millstream.engine.jobmanager.dispatcher import Dispatcher
from millstream.engine.metrics.job_metrics import JobMetricInputs, job_values, jobmanager_values
from millstream.engine.metrics.prometheus_reporter import data_server_families, jobmanager_families
from millstream.engine.runtime.task_metrics import LATENCY_FIGURE


def now_ms() -> int:
    return int(time.time() * 1000)


def host_name() -> str:
    """Flink's ``<host>`` variable of the JobManager: this machine's name."""
    return socket.gethostname()


def job_inputs(dispatcher: Dispatcher, job_id: str) -> JobMetricInputs | None:
    """A job the JobManager runs now (in memory, not archived), or None."""
    # Under the Dispatcher's lock: its control loop changes the graph's status and timestamps.
    with dispatcher.lock:
        jm = dispatcher.job_master(job_id)
        if jm is None:
            return None
        eg = jm.eg
        status = JobStatus(eg.status)
        inputs = JobMetricInputs(jm.job_id, jm.job_graph.name, status, dict(eg.timestamps), eg.attempt)
    cp = dispatcher.checkpointing(job_id)
    if cp is not None and cp.enabled:
        inputs = JobMetricInputs(inputs.job_id, inputs.job_name, status, inputs.timestamps, inputs.restarts, cp.overview())
    return inputs


def latency_histograms(dispatcher: Dispatcher, job_id: str) -> list[list[Any]]:
    """The latency histograms the running attempt's tasks reported (engine/runtime/latency_markers.py):
    ``[source_id, operator_id, operator_subtask, statistics]`` each, [] while tracking is off."""
    with dispatcher.lock:
        jm = dispatcher.job_master(job_id)
        attempt = jm.eg.attempt if jm is not None else None
    if attempt is None:
        return []
    out: list[list[Any]] = []
    for sample in dispatcher.read_metrics(job_id, attempt).values():
        entries = sample.get(LATENCY_FIGURE)
        if isinstance(entries, list):
            out.extend(e for e in entries if isinstance(e, list) and len(e) == 4 and isinstance(e[3], dict))
    return out


def running_jobs(dispatcher: Dispatcher) -> list[JobMetricInputs]:
    """Every job not yet ended: Flink's JobManager reports a job's metrics only while it runs it."""
    out = []
    for job_id in dispatcher.live_job_ids():
        inputs = job_inputs(dispatcher, job_id)
        if inputs is not None and not inputs.status.is_terminal():
            out.append(inputs)
    return out


def jobmanager_metric_values(dispatcher: Dispatcher) -> dict[str, float]:
    """The cluster's figures and the JobManager process's own (CPU, memory, threads)."""
    return {**jobmanager_values(dispatcher.overview()), **jobmanager_process_values()}


class JobManagerCollector(Collector):
    """Flink's JobManager and job metrics, collected when Prometheus scrapes."""

    def __init__(self, dispatcher: Dispatcher, host: str) -> None:
        self.dispatcher, self.host = dispatcher, host

    def collect(self) -> Iterator[Metric]:
        now = now_ms()
        jobs = [(j.job_id, j.job_name, job_values(j, now)) for j in running_jobs(self.dispatcher)]
        yield from jobmanager_families(jobmanager_metric_values(self.dispatcher), jobs, self.host)
        checked = [(d.index, d.address, d.status == "UP") for d in self.dispatcher.data_server_states() if d.status != "UNKNOWN"]
        yield from data_server_families(checked, self.host)


def scrape_targets(dispatcher: Dispatcher, jobmanager_address: str) -> list[dict[str, Any]]:
    """Prometheus HTTP service discovery: the JobManager (at the address the caller reached it by) and
    every registered TaskManager that serves an endpoint, ``[{targets: ["host:port"], labels}]``."""
    out: list[dict[str, Any]] = [{"targets": [jobmanager_address], "labels": {"component": "jobmanager"}}]
    pool = dispatcher.slot_pool_snapshot()
    for tm in sorted(pool.taskmanagers.values(), key=lambda t: t.id):
        port = tm.details.get("metrics_port")
        if isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536:
            host = tm.host if ":" not in tm.host else f"[{tm.host}]"  # an IPv6 address needs brackets
            out.append({"targets": [f"{host}:{port}"], "labels": {"component": "taskmanager"}})
    return out
