"""Slot sharing and spreading, as pure functions.

With slot sharing, slot j of a job holds subtask j of every vertex, so a job
needs as many slots as its highest parallelism. Slots are taken evenly across
TaskManagers: repeatedly from the TaskManager with the most free slots.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SlotId:
    taskmanager_id: str
    index: int


class NotEnoughSlots(Exception):
    def __init__(self, needed: int, available: int) -> None:
        super().__init__(f"waiting for resources: {needed} slots needed, {available} available")
        self.needed = needed
        self.available = available


def pick_slots(free: dict[str, list[int]], needed: int) -> list[SlotId]:
    """Choose ``needed`` free slots, spreading evenly; raise NotEnoughSlots if short."""
    available = sum(len(v) for v in free.values())
    if available < needed:
        raise NotEnoughSlots(needed, available)
    remaining = {tm: sorted(slots) for tm, slots in free.items()}
    chosen: list[SlotId] = []
    while len(chosen) < needed:
        # Most free slots first; ties broken by id so the choice is deterministic.
        tm = max(sorted(remaining), key=lambda t: len(remaining[t]))
        chosen.append(SlotId(tm, remaining[tm].pop(0)))
    return chosen


def subtask_slots(parallelisms: dict[str, int], slots: list[SlotId]) -> dict[tuple[str, int], SlotId]:
    """Slot sharing: subtask i of every vertex goes to slot i."""
    return {(vid, i): slots[i] for vid, p in parallelisms.items() for i in range(p)}
