"""Operator state (Flink's DefaultOperatorStateBackend): named list states held per subtask, not per key.

A *list state* is split evenly over the subtasks when a job is restored at
another parallelism (``split_operator_state``); a *union list state* goes whole
to every subtask. ``snapshot()`` copies the lists, so processing goes on while
the copy is written.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from millstream.engine.datastream.functions import (
    CheckpointedFunction,
    CheckpointListener,
    FunctionInitializationContext,
    FunctionSnapshotContext,
)
from millstream.engine.datastream.state import ListState, ListStateDescriptor, OperatorStateStore

LIST = "list"
UNION = "union"


class OperatorListState(ListState):
    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def get(self) -> Iterable[Any]:
        return list(self.items)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("operator list state cannot hold None")
        self.items.append(value)

    def add_all(self, values: list[Any]) -> None:
        for v in values:
            self.add(v)

    def update(self, values: list[Any]) -> None:
        self.items.clear()
        self.add_all(list(values or ()))

    def clear(self) -> None:
        self.items.clear()


class DefaultOperatorStateStore(OperatorStateStore):
    """``context.get_operator_state_store()``: list and union list states by descriptor name."""

    def __init__(self, operator_name: str, restored: Mapping[str, Mapping[str, list]] | None = None) -> None:
        self.operator_name = operator_name
        self.restored = restored is not None
        self.lists: dict[str, list[Any]] = {n: list(v) for n, v in ((restored or {}).get(LIST) or {}).items()}
        self.unions: dict[str, list[Any]] = {n: list(v) for n, v in ((restored or {}).get(UNION) or {}).items()}

    def _name(self, descriptor: Any) -> str:
        if not isinstance(descriptor, ListStateDescriptor):
            raise TypeError(
                f"'{self.operator_name}': operator state takes a ListStateDescriptor, got {type(descriptor).__name__}"
            )
        return descriptor.name

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        name = self._name(state_descriptor)
        if name in self.unions:
            raise TypeError(f"'{self.operator_name}': operator state '{name}' is a union list state, not a list state")
        return OperatorListState(self.lists.setdefault(name, []))

    def get_union_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        name = self._name(state_descriptor)
        if name in self.lists:
            raise TypeError(f"'{self.operator_name}': operator state '{name}' is a list state, not a union list state")
        return OperatorListState(self.unions.setdefault(name, []))

    def get_registered_state_names(self) -> set[str]:
        return set(self.lists) | set(self.unions)

    def snapshot(self) -> dict[str, dict[str, list]]:
        return {LIST: {n: list(v) for n, v in self.lists.items()}, UNION: {n: list(v) for n, v in self.unions.items()}}


def redistribute_operator_state(
    old: Sequence[Mapping[str, Mapping[str, list]] | None], subtask: int, parallelism: int
) -> dict[str, dict[str, list]] | None:
    """One new subtask's operator state from every old subtask's ``snapshot()`` (in old-subtask order).
    None when no old subtask had any: the function starts fresh (``is_restored()`` is False)."""
    from millstream.engine.checkpoint.rescale import split_operator_state

    present = [s for s in old if s is not None]
    if not present:
        return None
    if len(old) == parallelism:
        # Unchanged parallelism: each subtask gets its own lists back; union lists are its own too
        # here, and the task adds the other subtasks' (task_state_manager.restore_function_state).
        own = old[subtask]
        if own is None:
            return None
        return {LIST: {n: list(v) for n, v in (own.get(LIST) or {}).items()},
                UNION: {n: list(v) for n, v in (own.get(UNION) or {}).items()}}
    lists = split_operator_state([s.get(LIST) or {} for s in present], parallelism)[subtask]
    return {LIST: lists, UNION: _union([s.get(UNION) or {} for s in present])}


def _union(parts: Sequence[Mapping[str, list]]) -> dict[str, list]:
    """Every old subtask's elements of each union state, concatenated: each new subtask gets them all."""
    out: dict[str, list] = {}
    for p in parts:
        for n, v in p.items():
            out.setdefault(n, []).extend(v)
    return out


class _InitializationContext(FunctionInitializationContext):
    def __init__(self, store: DefaultOperatorStateStore, checkpoint_id: int | None) -> None:
        self.store = store
        self.checkpoint_id = checkpoint_id

    def is_restored(self) -> bool:
        return self.store.restored

    def get_operator_state_store(self) -> DefaultOperatorStateStore:
        return self.store

    def get_checkpoint_id(self) -> int | None:  # type: ignore[override]
        return self.checkpoint_id if self.store.restored else None

    def get_checkpoint_timestamp(self) -> int | None:  # type: ignore[override]
        return None


class _SnapshotContext(FunctionSnapshotContext):
    def __init__(self, checkpoint_id: int, timestamp: int) -> None:
        self.checkpoint_id = checkpoint_id
        self.timestamp = timestamp

    def get_checkpoint_id(self) -> int:
        return self.checkpoint_id

    def get_checkpoint_timestamp(self) -> int:
        return self.timestamp


class FunctionStateHandler:
    """Drives a user function's CheckpointedFunction / CheckpointListener hooks, if it has them
    (Flink's StreamingFunctionUtils); a function without them costs nothing."""

    def __init__(self, function: Any, operator_name: str) -> None:
        self.function = function
        self.operator_name = operator_name
        self.checkpointed = isinstance(function, CheckpointedFunction)
        self.listener = isinstance(function, CheckpointListener)
        self.store: DefaultOperatorStateStore | None = None

    def initialize(self, restored: Mapping[str, Mapping[str, list]] | None, checkpoint_id: int | None) -> None:
        if not self.checkpointed:
            return
        self.store = DefaultOperatorStateStore(self.operator_name, restored)
        self.function.initialize_state(_InitializationContext(self.store, checkpoint_id))

    def snapshot(self, checkpoint_id: int, timestamp: int) -> dict[str, dict[str, list]] | None:
        if not self.checkpointed:
            return None
        if self.store is None:  # a checkpoint before initialize: nothing was restored
            self.initialize(None, None)
        self.function.snapshot_state(_SnapshotContext(checkpoint_id, timestamp))
        return self.store.snapshot()  # type: ignore[union-attr]

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.listener:
            self.function.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        if self.listener:
            self.function.notify_checkpoint_aborted(checkpoint_id)
