"""A TaskManager's own metrics under Flink's names, from the figures it sends with each heartbeat.

The CPU figure is the TaskManager's process tree (it and its slot processes) as a share of the
host's cores, under the name Flink's dashboard reads for a TaskManager's CPU; the resident memory is
the same tree's. Pure: used by the REST metric endpoints and the TaskManager's Prometheus endpoint.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Flink's metric name <- the key in the TaskManager's heartbeat metrics.
TASKMANAGER_METRICS = {
    "Status.JVM.CPU.Load": "cpu_load",
    "Status.ProcessTree.Memory.RSS": "rss",
    "System.Memory.Available": "free_memory",
}


def taskmanager_values(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The figures under their names; empty until the TaskManager has sent a heartbeat."""
    return {name: raw[key] for name, key in TASKMANAGER_METRICS.items() if raw.get(key) is not None}
