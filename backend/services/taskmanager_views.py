"""Flink's REST shapes for TaskManagers, from the SlotPool's bookkeeping and the
metrics each TaskManager publishes with its heartbeat. Pure functions: no I/O."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

from millstream.engine.resourcemanager.slot_pool import SlotPool, TaskManagerInfo


class Hardware(TypedDict):
    cpuCores: int
    physicalMemory: int
    freeMemory: int
    managedMemory: int


class TaskManagerSummary(TypedDict):
    id: str
    path: str
    dataPort: int
    timeSinceLastHeartbeat: int
    slotsNumber: int
    freeSlots: int
    hardware: Hardware


class TaskManagers(TypedDict):
    taskmanagers: list[TaskManagerSummary]


class LogFile(TypedDict):
    name: str
    size: int
    mtime: int


class LogList(TypedDict):
    logs: list[LogFile]


def taskmanager_summary(tm: TaskManagerInfo, pool: SlotPool, metrics: Mapping[str, Any]) -> TaskManagerSummary:
    """One entry of ``GET /taskmanagers``. As in Flink, ``timeSinceLastHeartbeat`` holds
    the epoch milliseconds of the last heartbeat (the dashboard renders it as a date)."""
    d = tm.details
    return {
        "id": tm.id,
        "path": f"millstream://{tm.host or d.get('host', '')}/taskmanagers/{tm.id}",
        "dataPort": int(d.get("data_port") or -1),  # records travel through Redis, not a TM port
        "timeSinceLastHeartbeat": tm.last_heartbeat_ms,
        "slotsNumber": tm.slots,
        "freeSlots": tm.slots - len(pool.slots_of(tm.id)),
        "hardware": {
            "cpuCores": int(d.get("cpu_cores") or 0),
            "physicalMemory": int(d.get("physical_memory") or 0),
            "freeMemory": int(metrics.get("free_memory") or 0),
            "managedMemory": 0,
        },
    }


def taskmanagers_list(pool: SlotPool, metrics_of: Mapping[str, Mapping[str, Any]]) -> TaskManagers:
    """``GET /taskmanagers``; ``metrics_of`` maps TaskManager id to its latest metrics."""
    return {
        "taskmanagers": [
            taskmanager_summary(tm, pool, metrics_of.get(tm.id, {}))
            for tm in sorted(pool.taskmanagers.values(), key=lambda t: t.id)
        ]
    }


def taskmanager_detail(tm: TaskManagerInfo, pool: SlotPool, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``GET /taskmanagers/{id}``: the summary plus its allocated slots and live metrics."""
    d = tm.details
    allocated = sorted(pool.slots_of(tm.id).items())
    return {
        **taskmanager_summary(tm, pool, metrics),
        # With slot sharing each slot runs one subtask of every vertex: one core's worth.
        "allocatedSlots": [
            {"jobId": job, "resource": {"slot": index, "cpuCores": 1.0}} for index, job in allocated
        ],
        "metrics": {
            "cpuLoad": float(metrics.get("cpu_load") or 0.0),
            "freeMemory": int(metrics.get("free_memory") or 0),
            "residentMemory": int(metrics.get("rss") or 0),
            "physicalMemory": int(d.get("physical_memory") or 0),
            "timestamp": int(metrics.get("ts") or 0),
        },
        "pid": d.get("pid"),
        "registered": tm.registered_ms,
    }


def log_list(path: Path | None, stat: Mapping[str, int] | None) -> LogList:
    """``GET /taskmanagers/{id}/logs`` from the log file's name and ``{size, mtime}``
    (mtime in epoch ms), or an empty list when there is no log file."""
    if path is None or stat is None:
        return {"logs": []}
    return {"logs": [{"name": path.name, "size": int(stat["size"]), "mtime": int(stat["mtime"])}]}
