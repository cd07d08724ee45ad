"""Per-(key, window) state for triggers written against PyFlink (``ctx.get_partitioned_state``).

A view reads and writes one named slot of the window operator's trigger state
through two callables, so it holds no reference to the operator and works
wherever a trigger runs. Reducing, aggregating and list state can be merged
when session windows merge (``ctx.merge_partitioned_state``), as in Flink.
"""
from __future__ import annotations

from functools import reduce
from typing import Any, Callable, Iterator

from millstream.engine.datastream.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    ListStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueState,
    ValueStateDescriptor,
)

SLOT_PREFIX = "pyflink-state:"  # kept apart from the built-in triggers' slots ("count", "fire")

Getter = Callable[[str], Any]
Setter = Callable[[str, Any], None]


def _reduce_fn(descriptor: ReducingStateDescriptor) -> Callable[[Any, Any], Any]:
    f = descriptor.reduce_function
    return f.reduce if hasattr(f, "reduce") else f


class _Slot:
    def __init__(self, get: Getter, set_: Setter, descriptor: StateDescriptor) -> None:
        self._get, self._set, self._name = get, set_, SLOT_PREFIX + descriptor.name
        self.descriptor = descriptor

    def _read(self) -> Any:
        return self._get(self._name)

    def _write(self, value: Any) -> None:
        self._set(self._name, value)

    def clear(self) -> None:
        self._write(None)


class _Value(_Slot, ValueState):
    def value(self) -> Any:
        return self._read()

    def update(self, value: Any) -> None:
        self._write(value)


class _List(_Slot, ListState):
    def get(self) -> list[Any]:
        return list(self._read() or [])

    def add(self, value: Any) -> None:
        self._write([*self.get(), value])

    def add_all(self, values: list[Any]) -> None:
        self._write([*self.get(), *values])

    def update(self, values: list[Any]) -> None:
        self._write(list(values) or None)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


class _Reducing(_Slot, ReducingState):
    def get(self) -> Any:
        return self._read()

    def add(self, value: Any) -> None:
        current = self._read()
        self._write(value if current is None else _reduce_fn(self.descriptor)(current, value))  # type: ignore[arg-type]


class _Aggregating(_Slot, AggregatingState):
    def get(self) -> Any:
        acc = self._read()
        return None if acc is None else self.descriptor.agg_function.get_result(acc)  # type: ignore[attr-defined]

    def add(self, value: Any) -> None:
        f = self.descriptor.agg_function  # type: ignore[attr-defined]
        acc = self._read()
        self._write(f.add(value, f.create_accumulator() if acc is None else acc))


def state_view(descriptor: StateDescriptor, get: Getter, set_: Setter) -> Any:
    if isinstance(descriptor, ReducingStateDescriptor):
        return _Reducing(get, set_, descriptor)
    if isinstance(descriptor, AggregatingStateDescriptor):
        return _Aggregating(get, set_, descriptor)
    if isinstance(descriptor, ListStateDescriptor):
        return _List(get, set_, descriptor)
    if isinstance(descriptor, ValueStateDescriptor):
        return _Value(get, set_, descriptor)
    raise TypeError(
        f"a trigger's partitioned state is value, list, reducing or aggregating state, got {type(descriptor).__name__}"
    )


def merge_into(descriptor: StateDescriptor, merged_slots: list[dict[str, Any]], get: Getter, set_: Setter) -> None:
    """Fold the state of ``descriptor`` in ``merged_slots`` (the merged windows' trigger slots) into the target."""
    name = SLOT_PREFIX + descriptor.name
    parts = [slot[name] for slot in merged_slots if slot.get(name) is not None]
    if get(name) is not None:
        parts.insert(0, get(name))
    if isinstance(descriptor, ReducingStateDescriptor):
        combined = reduce(_reduce_fn(descriptor), parts) if parts else None
    elif isinstance(descriptor, AggregatingStateDescriptor):
        combined = reduce(descriptor.agg_function.merge, parts) if parts else None
    elif isinstance(descriptor, ListStateDescriptor):
        combined = [v for p in parts for v in p] or None
    else:
        # Flink: only merging state (reducing, aggregating, list) can be merged.
        raise TypeError(f"merge_partitioned_state needs reducing, aggregating or list state, got {type(descriptor).__name__}")
    set_(name, combined)
