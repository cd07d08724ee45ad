"""``pyflink.datastream.slot_sharing_group``: ``SlotSharingGroup`` and ``MemorySize``.

Millstream puts every operator in the default slot-sharing group (one slot holds
one subtask of every vertex), so a group is accepted and described but does not
change placement; its resource figures are recorded, not enforced.
"""
from __future__ import annotations

from typing import Any

from millstream.engine.compat.unsupported import java_only

__all__ = ["MemorySize", "SlotSharingGroup"]


class MemorySize:
    """A number of bytes, as Flink's MemorySize."""

    get_java_memory_size = java_only("get_bytes() or get_mebi_bytes() of the MemorySize itself")

    def __init__(self, bytes_size: int) -> None:
        if bytes_size < 0:
            raise ValueError(f"a memory size cannot be negative, got {bytes_size}")
        self._bytes = int(bytes_size)

    @staticmethod
    def of_mebi_bytes(mebi_bytes: int) -> "MemorySize":
        return MemorySize(mebi_bytes << 20)

    def get_bytes(self) -> int:
        return self._bytes

    def get_kibi_bytes(self) -> int:
        return self._bytes >> 10

    def get_mebi_bytes(self) -> int:
        return self._bytes >> 20

    def get_gibi_bytes(self) -> int:
        return self._bytes >> 30

    def get_tebi_bytes(self) -> int:
        return self._bytes >> 40

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemorySize) and other._bytes == self._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __lt__(self, other: "MemorySize") -> bool:
        return self._bytes < other._bytes

    def __repr__(self) -> str:
        return f"MemorySize({self._bytes} bytes)"


class SlotSharingGroup:
    """A named group with optional resource figures (recorded only; see the module docstring)."""

    get_java_slot_sharing_group = java_only("the SlotSharingGroup itself, stream.slot_sharing_group(group), and its getters")

    def __init__(self, name: str, resources: dict[str, Any] | None = None) -> None:
        if not name:
            raise ValueError("a slot sharing group needs a name")
        self._name = name
        self._resources = dict(resources or {})

    def get_name(self) -> str:
        return self._name

    def get_managed_memory(self) -> MemorySize | None:
        return self._resources.get("managed_memory")

    def get_task_heap_memory(self) -> MemorySize | None:
        return self._resources.get("task_heap_memory")

    def get_task_off_heap_memory(self) -> MemorySize | None:
        return self._resources.get("task_off_heap_memory")

    def get_cpu_cores(self) -> float | None:
        return self._resources.get("cpu_cores")

    def get_external_resources(self) -> dict[str, float]:
        return dict(self._resources.get("external_resources", {}))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlotSharingGroup) and (other._name, other._resources) == (self._name, self._resources)

    def __hash__(self) -> int:
        return hash(self._name)

    @staticmethod
    def builder(name: str) -> "SlotSharingGroup.Builder":
        return SlotSharingGroup.Builder(name)

    class Builder:
        def __init__(self, name: str) -> None:
            self._name = name
            self._resources: dict[str, Any] = {}

        def set_cpu_cores(self, cpu_cores: float) -> "SlotSharingGroup.Builder":
            self._resources["cpu_cores"] = float(cpu_cores)
            return self

        def set_task_heap_memory(self, task_heap_memory: MemorySize) -> "SlotSharingGroup.Builder":
            self._resources["task_heap_memory"] = task_heap_memory
            return self

        def set_task_heap_memory_mb(self, task_heap_memory_mb: int) -> "SlotSharingGroup.Builder":
            return self.set_task_heap_memory(MemorySize.of_mebi_bytes(task_heap_memory_mb))

        def set_task_off_heap_memory(self, task_off_heap_memory: MemorySize) -> "SlotSharingGroup.Builder":
            self._resources["task_off_heap_memory"] = task_off_heap_memory
            return self

        def set_task_off_heap_memory_mb(self, task_off_heap_memory_mb: int) -> "SlotSharingGroup.Builder":
            return self.set_task_off_heap_memory(MemorySize.of_mebi_bytes(task_off_heap_memory_mb))

        def set_managed_memory(self, managed_memory: MemorySize) -> "SlotSharingGroup.Builder":
            self._resources["managed_memory"] = managed_memory
            return self

        def set_managed_memory_mb(self, managed_memory_mb: int) -> "SlotSharingGroup.Builder":
            return self.set_managed_memory(MemorySize.of_mebi_bytes(managed_memory_mb))

        def set_external_resource(self, name: str, value: float) -> "SlotSharingGroup.Builder":
            self._resources.setdefault("external_resources", {})[name] = float(value)
            return self

        def build(self) -> "SlotSharingGroup":
            return SlotSharingGroup(self._name, self._resources)
