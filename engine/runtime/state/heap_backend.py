"""The heap keyed state backend: one dict per state name, keyed by the current key.

Keys are not grouped per key group on the hot path; a snapshot splits them by
key group, which is all that rescaling needs. With incremental checkpoints its tables record
what changed (``heap_incremental``).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from millstream.engine.datastream.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueState,
    ValueStateDescriptor,
)
from millstream.engine.runtime.key_group_batch import assign_to_key_groups, group_keys, key_grouper
from millstream.engine.runtime.state.heap_incremental import EVERYTHING, MUTABLE_KINDS, TrackedTable, begin_delta, cut
from millstream.engine.runtime.state.rolled_compaction import RolledCompaction
from millstream.engine.runtime.state.state_chain import ChangeTracker, SnapshotPlan


class StateTypeMismatch(TypeError):
    pass


class StateFactory:
    """Builds Flink's state objects from descriptors over ``table(name, kind)``, which each
    store implements (the heap and LMDB backends, and per-window namespaced stores)."""

    def table(self, name: str, kind: str) -> Any:
        raise NotImplementedError

    def get_state(self, d: ValueStateDescriptor) -> ValueState:
        if d.ttl_config is not None:
            return TtlValueState(self, self.table(d.name, "ttl-value"), d.ttl_config)
        return HeapValueState(self, self.table(d.name, "value"))

    def get_list_state(self, d: ListStateDescriptor) -> ListState:
        if d.ttl_config is not None:
            return TtlListState(self, self.table(d.name, "ttl-list"), d.ttl_config)
        return HeapListState(self, self.table(d.name, "list"))

    def get_map_state(self, d: MapStateDescriptor) -> MapState:
        if d.ttl_config is not None:
            return TtlMapState(self, self.table(d.name, "ttl-map"), d.ttl_config)
        return HeapMapState(self, self.table(d.name, "map"))

    def get_reducing_state(self, d: ReducingStateDescriptor) -> "HeapReducingState":
        return HeapReducingState(self, self.table(d.name, "reducing"), d.reduce_function)

    def get_aggregating_state(self, d: AggregatingStateDescriptor) -> "HeapAggregatingState":
        return HeapAggregatingState(self, self.table(d.name, "aggregating"), d.agg_function)


class HeapKeyedStateBackend(StateFactory):
    # Its snapshot may be taken in a forked copy-on-write child (engine/runtime/forked_snapshot.py):
    # plain Python objects, no file or lock the child would share with the task.
    snapshot_in_fork = True

    def __init__(
        self,
        max_parallelism: int,
        clock: Callable[[], int] | None = None,
        key_spec: Any = None,
        incremental: bool = False,
        whole: bool = False,
    ) -> None:
        self.max_parallelism = max_parallelism
        self.key_spec = key_spec  # the declared key type, which decides each key's key group
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.current_key: Any = None
        self.tables: dict[str, dict[Any, Any]] = {}
        self.kinds: dict[str, str] = {}
        # Incremental checkpoints: tables record changed keys, and the tracker the chain they extend.
        # Its tables record every write from empty, so the first checkpoint is a delta on the empty chain.
        self.changes: ChangeTracker | None = ChangeTracker(from_empty=True) if incremental else None
        # Checkpoints that are not incremental but tracked all the same: each is one whole file, the
        # previous one's key groups merged with what changed, on the writer thread (no fork; issue 16).
        self.whole = whole and incremental
        self.rolled = RolledCompaction()  # which key groups each checkpoint rebases (rolled_compaction)
        # Deltas whose copy-on-write views may still be attached, by checkpoint id: a view never read
        # (its checkpoint was declined before the writer ran) would tax every write, so views are
        # dropped once their checkpoint is aborted or a later one completed (the writer runs in order).
        self._views: dict[int, Callable[[], None]] = {}

    def table(self, name: str, kind: str) -> dict[Any, Any]:
        known = self.kinds.get(name)
        if known is not None and known != kind:
            raise StateTypeMismatch(f"state '{name}' was registered as {known} state, not {kind} state")
        self.kinds[name] = kind
        t = self.tables.get(name)
        if t is None:
            if self.changes is not None:
                t = TrackedTable(name, kind in MUTABLE_KINDS or kind not in _WHOLE_KINDS, self.changes.table_cleared)
            else:
                t = {}
            self.tables[name] = t
        return t

    # -- incremental checkpoints (heap_incremental) ------------------------------------------
    def begin_incremental_snapshot(
        self, checkpoint_id: int, compact: bool = False, live: int | None = None, fork_bases: bool = True
    ) -> tuple[SnapshotPlan, Callable[[], list[tuple[int, bytes]]] | None]:
        """On the task thread, at the barrier: the plan (a base, or a delta on the last completed
        checkpoint's chain) and, for a delta, the callable that reads the changed entries as of now on
        the writer thread (parts of a shared file). A base has no callable: the caller takes the
        tables whole. ``compact``: the caller can compact a chain from its
        files, so no base is forked while the chain is sound: the plan is a delta, and its writer merges
        the chain's files as ``SnapshotPlan.merge_from`` says (``live``: entries in the tables now).
        ``fork_bases`` False (what the task's snapshots ask: ``snapshot_heap_incremental``): where a
        base is due, a delta of every key on the empty chain instead, read on the writer thread like
        any delta (``heap_incremental.EVERYTHING``)."""
        if self.changes is None:
            raise ValueError("this heap state backend was not opened for incremental checkpoints")
        tables = {n: t for n, t in self.tables.items() if isinstance(t, TrackedTable)}
        plan, sets = self.changes.plan_cut(checkpoint_id, cut(tables), compact, live)
        if plan.is_base and not fork_bases:
            plan = SnapshotPlan(checkpoint_id, (), {}, plan.drops, rolled=compact, live=live)
            sets = [dict.fromkeys(tables, EVERYTHING)]
        elif plan.is_base:
            return plan, None
        read, discard = begin_delta(tables, sets, key_grouper(self.max_parallelism, self.key_spec))
        self._views[checkpoint_id] = discard
        return plan, read

    def resume_incremental(self, chain: Any) -> None:
        """Restored exactly from ``chain``: the next checkpoint may be a delta on it."""
        if self.changes is not None:
            cut({n: t for n, t in self.tables.items() if isinstance(t, TrackedTable)})
            self.changes.resume(chain)
            self.rolled.reset()

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.changes is not None:
            self.changes.confirm(checkpoint_id)
            for cid in [c for c in self._views if c <= checkpoint_id]:
                self._views.pop(cid)()

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        if self.changes is not None:
            self.changes.abort(checkpoint_id)
            discard = self._views.pop(checkpoint_id, None)
            if discard is not None:
                discard()

    def snapshot_by_key_group(self) -> dict[int, dict[str, list[tuple[Any, Any]]]]:
        """{key group: {state name: [(key, value)]}}, the unit that rescaling moves. The keys are hashed
        in batches (``key_group_batch``) and sorted by key group a slice of the table at a time: the
        pairs of a key group are then read from a few MB of the table, not from all of it (a cache
        miss per key, four times slower)."""
        out: dict[int, dict[str, list[tuple[Any, Any]]]] = {}
        for name, table in self.tables.items():
            keys = list(dict.keys(table))
            kgs = assign_to_key_groups(keys, self.max_parallelism, self.key_spec)
            value = dict.__getitem__.__get__(table)  # not a read the change tracking counts
            for lo in range(0, len(keys), _GROUP_SLICE):
                ordered, runs = group_keys(keys[lo : lo + _GROUP_SLICE], kgs[lo : lo + _GROUP_SLICE])
                for kg, a, b in runs:
                    piece = ordered[a:b]
                    groups = out.get(kg)
                    if groups is None:
                        groups = out[kg] = {}
                    pairs = groups.get(name)
                    if pairs is None:
                        groups[name] = list(zip(piece, map(value, piece)))
                    else:
                        pairs.extend(zip(piece, map(value, piece)))
        return out


_GROUP_SLICE = 4_096  # keys of a table sorted by key group at a time (``snapshot_by_key_group``)


# State kinds whose values are written back whole (``t[k] = v``); any other kind's values may be
# changed in place after a read, so with incremental checkpoints its reads count as changes.
_WHOLE_KINDS = frozenset({"value", "reducing", "aggregating", "ttl-value"})


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


class HeapReducingState(ReducingState):
    def __init__(self, backend: HeapKeyedStateBackend, table: dict[Any, Any], reduce_function: Any) -> None:
        self.backend = backend
        self.t = table
        self.fn = reduce_function.reduce if hasattr(reduce_function, "reduce") else reduce_function

    def get(self) -> Any:
        return self.t.get(self.backend.current_key)

    def add(self, value: Any) -> None:
        k = self.backend.current_key
        self.t[k] = value if k not in self.t else self.fn(self.t[k], value)

    def clear(self) -> None:
        self.t.pop(self.backend.current_key, None)


class HeapAggregatingState(AggregatingState):
    def __init__(self, backend: HeapKeyedStateBackend, table: dict[Any, Any], agg_function: Any) -> None:
        self.backend = backend
        self.t = table
        self.agg = agg_function

    def get(self) -> Any:
        k = self.backend.current_key
        return self.agg.get_result(self.t[k]) if k in self.t else None

    def add(self, value: Any) -> None:
        k = self.backend.current_key
        acc = self.t[k] if k in self.t else self.agg.create_accumulator()
        self.t[k] = self.agg.add(value, acc)

    def clear(self) -> None:
        self.t.pop(self.backend.current_key, None)


# -- time-to-live: entries are stored as (value, expires_at_ms) ---------------------


class _Ttl:
    def __init__(self, backend: HeapKeyedStateBackend, cfg: StateTtlConfig) -> None:
        self.backend = backend
        self.ttl = cfg.ttl_ms
        self.refresh_on_read = cfg.update_type is StateTtlConfig.UpdateType.OnReadAndWrite
        self.return_expired = cfg.visibility is StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp

    def stamp(self, value: Any) -> tuple[Any, int]:
        return value, self.backend.clock() + self.ttl

    def live(self, entry: tuple[Any, int]) -> bool:
        return self.return_expired or entry[1] > self.backend.clock()


class TtlValueState(ValueState):
    def __init__(self, backend: HeapKeyedStateBackend, table: dict[Any, Any], cfg: StateTtlConfig) -> None:
        self.backend, self.t, self.ttl = backend, table, _Ttl(backend, cfg)

    def value(self) -> Any:
        k = self.backend.current_key
        entry = self.t.get(k)
        if entry is None:
            return None
        if not self.ttl.live(entry):
            del self.t[k]  # expired state is cleaned up when it is read
            return None
        if self.ttl.refresh_on_read:
            self.t[k] = self.ttl.stamp(entry[0])
        return entry[0]

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self.t[self.backend.current_key] = self.ttl.stamp(value)

    def clear(self) -> None:
        self.t.pop(self.backend.current_key, None)


class TtlListState(ListState):
    """TTL per element, as in Flink."""

    def __init__(self, backend: HeapKeyedStateBackend, table: dict[Any, Any], cfg: StateTtlConfig) -> None:
        self.backend, self.t, self.ttl = backend, table, _Ttl(backend, cfg)

    def get(self) -> Iterable[Any]:
        k = self.backend.current_key
        entries = [e for e in self.t.get(k, ()) if self.ttl.live(e)]
        if self.ttl.refresh_on_read:
            entries = [self.ttl.stamp(v) for v, _ in entries]
        if entries:
            self.t[k] = entries
        else:
            self.t.pop(k, None)
        return [v for v, _ in entries]

    def add(self, value: Any) -> None:
        self.t.setdefault(self.backend.current_key, []).append(self.ttl.stamp(value))

    def add_all(self, values: list[Any]) -> None:
        self.t.setdefault(self.backend.current_key, []).extend(self.ttl.stamp(v) for v in values)

    def update(self, values: list[Any]) -> None:
        if values:
            self.t[self.backend.current_key] = [self.ttl.stamp(v) for v in values]
        else:
            self.clear()

    def clear(self) -> None:
        self.t.pop(self.backend.current_key, None)


class TtlMapState(MapState):
    """TTL per map entry, as in Flink."""

    def __init__(self, backend: HeapKeyedStateBackend, table: dict[Any, Any], cfg: StateTtlConfig) -> None:
        self.backend, self.t, self.ttl = backend, table, _Ttl(backend, cfg)

    def _m(self) -> dict[Any, Any]:
        k = self.backend.current_key
        m = self.t.get(k)
        if m is None:
            return {}
        expired = [mk for mk, e in m.items() if not self.ttl.live(e)]
        for mk in expired:
            del m[mk]
        if not m:
            del self.t[k]
        return m

    def get(self, key: Any) -> Any:
        m = self._m()
        entry = m.get(key)
        if entry is None:
            return None
        if self.ttl.refresh_on_read:
            m[key] = self.ttl.stamp(entry[0])
        return entry[0]

    def put(self, key: Any, value: Any) -> None:
        self.t.setdefault(self.backend.current_key, {})[key] = self.ttl.stamp(value)

    def put_all(self, items: dict[Any, Any]) -> None:
        for k, v in items.items():
            self.put(k, v)

    def contains(self, key: Any) -> bool:
        return key in self._m()

    def remove(self, key: Any) -> None:
        m = self._m()
        m.pop(key, None)
        if not m:
            self.t.pop(self.backend.current_key, None)

    def items(self) -> Iterable[tuple[Any, Any]]:
        return [(k, e[0]) for k, e in self._m().items()]

    def keys(self) -> Iterable[Any]:
        return list(self._m().keys())

    def values(self) -> Iterable[Any]:
        return [e[0] for e in self._m().values()]

    def is_empty(self) -> bool:
        return not self._m()

    def clear(self) -> None:
        self.t.pop(self.backend.current_key, None)
