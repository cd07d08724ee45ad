"""View models of the cluster pages: Overview, Jobs list, Slots and TaskManagers.

Built from the REST service functions (``job_views``, ``taskmanager_views``)
and the SlotPool snapshot; pure, with ``now`` passed in.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from millstream.backend.services import job_views, taskmanager_views
from millstream.engine.jobmanager.job_store import JobRecord
from millstream.engine.resourcemanager.slot_pool import SlotPool

TERMINAL = ("FINISHED", "CANCELED", "FAILED")
JOB_SORT_KEYS = {"name": "name", "state": "state", "start": "start-time", "duration": "duration"}


def split_jobs(records: Iterable[JobRecord], now: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(running, completed) job overviews, newest first, in the ``/jobs/overview`` shape."""
    jobs = job_views.jobs_overview(records, now)["jobs"]
    return [j for j in jobs if j["state"] not in TERMINAL], [j for j in jobs if j["state"] in TERMINAL]


def filter_jobs(
    jobs: list[dict[str, Any]], state: str = "", name: str = "", sort: str = "start", descending: bool = True
) -> list[dict[str, Any]]:
    """The Jobs page's filter (state exact, name substring, case-insensitive) and sort."""
    name = name.strip().lower()
    out = [j for j in jobs if (not state or j["state"] == state) and (not name or name in j["name"].lower())]
    key = JOB_SORT_KEYS.get(sort, "start-time")

    def sort_key(j: dict[str, Any]) -> tuple[Any, str]:
        value = j[key]
        return (value.lower() if isinstance(value, str) else value), j["jid"]

    return sorted(out, key=sort_key, reverse=descending)


@dataclass(frozen=True)
class SlotCell:
    index: int
    job_id: str | None
    job_name: str | None
    subtasks: tuple[str, ...]  # "<vertex name> #<subtask>"


@dataclass(frozen=True)
class TaskManagerSlots:
    id: str
    host: str
    slots: tuple[SlotCell, ...]

    @property
    def free(self) -> int:
        return sum(1 for s in self.slots if s.job_id is None)


def slots_grid(pool: SlotPool, records: Mapping[str, JobRecord]) -> list[TaskManagerSlots]:
    """Every TaskManager as a row of its slots; ``records`` holds the jobs that own slots
    (live records, so subtasks carry their TaskManager and slot)."""
    held: dict[tuple[str, int], list[str]] = {}
    for rec in records.values():
        for v in job_views.vertices_of(rec):
            for st in v.get("subtasks", []):
                if st.get("taskmanager_id") and st.get("slot") is not None and st["status"] not in TERMINAL:
                    held.setdefault((st["taskmanager_id"], int(st["slot"])), []).append(f"{v['name']} #{st['subtask']}")
    rows = []
    for tm in sorted(pool.taskmanagers.values(), key=lambda t: t.id):
        allocated = pool.slots_of(tm.id)
        cells = []
        for i in range(tm.slots):
            jid = allocated.get(i)
            rec = records.get(jid) if jid else None
            cells.append(SlotCell(i, jid, rec.name if rec else None, tuple(held.get((tm.id, i), ()))))
        rows.append(TaskManagerSlots(tm.id, tm.host, tuple(cells)))
    return rows


def heartbeat_lateness(last_heartbeat_ms: int, now: int, interval_ms: int, timeout_ms: int) -> str:
    """'ok' within two heartbeat intervals, 'late' after that, 'critical' past half the
    timeout (the TaskManager is about to be declared lost)."""
    age = now - last_heartbeat_ms
    if last_heartbeat_ms <= 0 or age > timeout_ms / 2:
        return "critical"
    if age > 2 * interval_ms:
        return "late"
    return "ok"


@dataclass(frozen=True)
class TaskManagerRow:
    id: str
    host: str
    slots: int
    free_slots: int
    heartbeat_ms: int
    heartbeat_age: int
    lateness: str
    cpu_load: float
    rss: int
    physical_memory: int
    free_memory: int
    cpu_cores: int


def taskmanager_rows(
    pool: SlotPool, metrics_of: Mapping[str, Mapping[str, Any]], now: int, interval_ms: int, timeout_ms: int
) -> list[TaskManagerRow]:
    rows = []
    for tm in sorted(pool.taskmanagers.values(), key=lambda t: t.id):
        d = taskmanager_views.taskmanager_detail(tm, pool, metrics_of.get(tm.id, {}))
        hb = d["timeSinceLastHeartbeat"]
        rows.append(
            TaskManagerRow(
                id=d["id"],
                host=tm.host,
                slots=d["slotsNumber"],
                free_slots=d["freeSlots"],
                heartbeat_ms=hb,
                heartbeat_age=max(now - hb, 0),
                lateness=heartbeat_lateness(hb, now, interval_ms, timeout_ms),
                cpu_load=d["metrics"]["cpuLoad"],
                rss=d["metrics"]["residentMemory"],
                physical_memory=d["metrics"]["physicalMemory"],
                free_memory=d["metrics"]["freeMemory"],
                cpu_cores=d["hardware"]["cpuCores"],
            )
        )
    return rows
