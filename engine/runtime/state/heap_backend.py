"""The heap keyed state backend: one dict per state name, keyed by the current key.

Keys are not grouped per key group on the hot path; a snapshot splits them by
key group, which is all that rescaling needs.
"""
from __future__ import annotations

from typing import Any, Iterable

from engine.datastream.state import (
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ValueState,
    ValueStateDescriptor,
)
from engine.runtime.key_groups import assign_to_key_group


class StateTypeMismatch(TypeError):
    pass


class HeapKeyedStateBackend:
    def __init__(self, max_parallelism: int) -> None:
        self.max_parallelism = max_parallelism
        self.current_key: Any = None
        self.tables: dict[str, dict[Any, Any]] = {}
        self.kinds: dict[str, str] = {}

    def table(self, name: str, kind: str) -> dict[Any, Any]:
        known = self.kinds.get(name)
        if known is not None and known != kind:
            raise StateTypeMismatch(f"state '{name}' was registered as {known} state, not {kind} state")
        self.kinds[name] = kind
        return self.tables.setdefault(name, {})

    def get_state(self, d: ValueStateDescriptor) -> "HeapValueState":
        return HeapValueState(self, self.table(d.name, "value"))

    def get_list_state(self, d: ListStateDescriptor) -> "HeapListState":
        return HeapListState(self, self.table(d.name, "list"))

    def get_map_state(self, d: MapStateDescriptor) -> "HeapMapState":
        return HeapMapState(self, self.table(d.name, "map"))

    def snapshot_by_key_group(self) -> dict[int, dict[str, list[tuple[Any, Any]]]]:
        """{key group: {state name: [(key, value)]}}, the unit that rescaling moves."""
        out: dict[int, dict[str, list[tuple[Any, Any]]]] = {}
        for name, table in self.tables.items():
            for key, value in table.items():
                kg = assign_to_key_group(key, self.max_parallelism)
                out.setdefault(kg, {}).setdefault(name, []).append((key, value))
        return out


class HeapValueState(ValueState):
    def __init__(self, backend: HeapKeyedStateBackend, table: dict[Any, Any]) -> None:
        self.backend = backend
        self.t = table

    def value(self) -> Any:
        return self.t.get(self.backend.current_key)

    def update(self, value: Any) -> None:
        if value is None:
            self.t.pop(self.backend.current_key, None)
        else:
            self.t[self.backend.current_key] = value

    def clear(self) -> None:
        self.t.pop(self.backend.current_key, None)


class HeapListState(ListState):
    def __init__(self, backend: HeapKeyedStateBackend, table: dict[Any, Any]) -> None:
        self.backend = backend
        self.t = table

    def get(self) -> Iterable[Any]:
        return list(self.t.get(self.backend.current_key, ()))

    def add(self, value: Any) -> None:
        self.t.setdefault(self.backend.current_key, []).append(value)

    def add_all(self, values: list[Any]) -> None:
        self.t.setdefault(self.backend.current_key, []).extend(values)

    def update(self, values: list[Any]) -> None:
        if values:
            self.t[self.backend.current_key] = list(values)
        else:
            self.clear()

    def clear(self) -> None:
        self.t.pop(self.backend.current_key, None)


class HeapMapState(MapState):
    def __init__(self, backend: HeapKeyedStateBackend, table: dict[Any, Any]) -> None:
        self.backend = backend
        self.t = table

    def _m(self, create: bool = False) -> dict[Any, Any]:
        k = self.backend.current_key
        m = self.t.get(k)
        if m is None:
            m = {}
            if create:
                self.t[k] = m
        return m

    def get(self, key: Any) -> Any:
        return self._m().get(key)

    def put(self, key: Any, value: Any) -> None:
        self._m(True)[key] = value

    def put_all(self, items: dict[Any, Any]) -> None:
        self._m(True).update(items)

    def contains(self, key: Any) -> bool:
        return key in self._m()

    def remove(self, key: Any) -> None:
        m = self._m()
        m.pop(key, None)
        if not m:
            self.t.pop(self.backend.current_key, None)

    def items(self) -> Iterable[tuple[Any, Any]]:
        return list(self._m().items())

    def keys(self) -> Iterable[Any]:
        return list(self._m().keys())

    def values(self) -> Iterable[Any]:
        return list(self._m().values())

    def is_empty(self) -> bool:
        return not self._m()

    def clear(self) -> None:
        self.t.pop(self.backend.current_key, None)
