"""What every keyed state backend offers, and the factory that picks one by name.

The names are Flink's ``state.backend.type`` values: ``hashmap`` keeps state in
dicts on the heap; ``rocksdb`` (Flink's EmbeddedRocksDBStateBackend) keeps it on
disk, here in LMDB, so ``lmdb`` is accepted as well.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any, Callable, Protocol

from millstream.engine.checkpoint.config import FULL_CHECKPOINTS_FROM_CHANGES_KEY
from millstream.engine.datastream.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    ValueState,
    ValueStateDescriptor,
)

HASHMAP = "hashmap"
ON_DISK = ("rocksdb", "lmdb")


class KeyedStateBackend(Protocol):
    """Keyed state for one subtask, partitioned by key group.

    ``current_key`` is set by the operator before it touches state. ``table``
    is the hot path: a mutable mapping of key -> value per state name whose
    values operators may change in place.
    """

    current_key: Any

    @property
    def max_parallelism(self) -> int: ...

    @property
    def clock(self) -> Callable[[], int]: ...

    @property
    def tables(self) -> Mapping[str, MutableMapping[Any, Any]]: ...

    def table(self, name: str, kind: str) -> MutableMapping[Any, Any]:
        """The mapping of state ``name``; raises StateTypeMismatch if it was registered with another kind."""
        ...

    def get_state(self, d: ValueStateDescriptor) -> ValueState: ...

    def get_list_state(self, d: ListStateDescriptor) -> ListState: ...

    def get_map_state(self, d: MapStateDescriptor) -> MapState: ...

    def get_reducing_state(self, d: ReducingStateDescriptor) -> ReducingState: ...

    def get_aggregating_state(self, d: AggregatingStateDescriptor) -> AggregatingState: ...

    def snapshot_by_key_group(self) -> dict[int, dict[str, list[tuple[Any, Any]]]]:
        """{key group: {state name: [(key, value)]}}, the unit that rescaling moves.

        Checkpoints take cheaper paths where a backend offers one: ``snapshot_in_fork`` (the heap
        backend: its tables are written whole from a forked child) or ``begin_snapshot`` (the
        on-disk backend: raw records read from its own read transaction off the task thread);
        see ``task_state_manager``."""
        ...


# Millstream's own option (no Flink equivalent): heap checkpoints that are not incremental are each one
# whole file, built on the writer thread from the previous checkpoint's file and the keys changed since
# (``HeapKeyedStateBackend.whole``), instead of pickled whole in a forked child.
WHOLE_FROM_CHANGES = FULL_CHECKPOINTS_FROM_CHANGES_KEY


def create_keyed_backend(
    kind: str,
    max_parallelism: int,
    directory: str | os.PathLike[str] | None,
    clock: Callable[[], int] | None = None,
    *,
    cache_entries: int = 10_000,
    key_spec: Any = None,
    incremental: bool = False,
    whole_from_changes: bool = False,
) -> KeyedStateBackend:
    """A backend by its configured name; ``directory`` is only used, and then required, by the on-disk one.
    ``incremental`` (Flink's ``state.backend.incremental``): checkpoints write what changed since the
    last completed one (the heap backend through a changelog of keys, as Flink's changelog backend).
    ``whole_from_changes`` (the heap backend, checkpoints not incremental): each checkpoint is still one
    whole file, built on the writer thread from the previous one and what changed since (no fork)."""
    name = kind.strip().lower()
    if name == HASHMAP:
        from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend

        tracked = incremental or whole_from_changes  # whole checkpoints built from the changes track them too
        return HeapKeyedStateBackend(max_parallelism, clock, key_spec, incremental=tracked, whole=whole_from_changes)
    if name in ON_DISK:
        if directory is None:
            raise ValueError(f"the '{name}' state backend keeps state on disk and needs a directory")
        from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend  # imports lmdb only when used

        return LmdbKeyedStateBackend(
            max_parallelism, directory, cache_entries=cache_entries, clock=clock, key_spec=key_spec, incremental=incremental
        )
    raise ValueError(f"unknown state backend {kind!r}: expected one of {', '.join((HASHMAP, *ON_DISK))}")
