"""SlotPool: the pure bookkeeping of registered TaskManagers and allocated slots."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from millstream.engine.scheduler.slot_assignment import SlotId, pick_slots


@dataclass
class TaskManagerInfo:
    id: str
    slots: int
    host: str = "127.0.0.1"
    registered_ms: int = 0
    last_heartbeat_ms: int = 0
    details: dict[str, Any] = field(default_factory=dict)


class SlotPool:
    def __init__(self) -> None:
        self.taskmanagers: dict[str, TaskManagerInfo] = {}
        self.allocations: dict[SlotId, str] = {}  # slot -> job id

    def register(self, info: TaskManagerInfo) -> bool:
        """Add or refresh a TaskManager; True if it is new."""
        known = info.id in self.taskmanagers
        self.taskmanagers[info.id] = info
        return not known

    def remove(self, tm_id: str) -> set[str]:
        """Forget a TaskManager; returns the jobs that had slots on it."""
        self.taskmanagers.pop(tm_id, None)
        lost = {s: j for s, j in self.allocations.items() if s.taskmanager_id == tm_id}
        for s in lost:
            del self.allocations[s]
        return set(lost.values())

    def free_slots(self) -> dict[str, list[int]]:
        return {
            tm.id: [i for i in range(tm.slots) if SlotId(tm.id, i) not in self.allocations]
            for tm in self.taskmanagers.values()
        }

    def total_slots(self) -> int:
        return sum(tm.slots for tm in self.taskmanagers.values())

    def available_slots(self) -> int:
        return sum(len(v) for v in self.free_slots().values())

    def allocate(self, job_id: str, needed: int) -> list[SlotId]:
        """Reserve slots for a job; raises NotEnoughSlots and reserves nothing when short."""
        slots = pick_slots(self.free_slots(), needed)
        for s in slots:
            self.allocations[s] = job_id
        return slots

    def is_allocated(self, tm_id: str, index: int) -> bool:
        return SlotId(tm_id, index) in self.allocations

    def assign(self, job_id: str, slots: list[tuple[str, int]]) -> None:
        """Reserve these very slots: a new JobManager adopting tasks that already run in them."""
        for tm_id, index in slots:
            self.allocations[SlotId(tm_id, index)] = job_id

    def release(self, job_id: str) -> None:
        for s in [s for s, j in self.allocations.items() if j == job_id]:
            del self.allocations[s]

    def slots_of(self, tm_id: str) -> dict[int, str]:
        return {s.index: j for s, j in self.allocations.items() if s.taskmanager_id == tm_id}
