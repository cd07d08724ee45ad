"""Incremental checkpoints of the on-disk keyed backend: what changed, the chain of files, its replay.

Millstream's version of RocksDB's incremental checkpoints with FLIP-158's periodic materialisation.
The backend records the LMDB keys it writes back or deletes (``ChangeTracker``). A checkpoint then
writes either a *base* (every record) or a *delta*: the records of the keys changed since the last
*completed* checkpoint as they are at the barrier, a deleted key as a tombstone (``None``). Its
state refers to the chain ``[base, delta, ...]``; the files live in the job's ``shared/`` directory
and are reference-counted by the coordinator (``millstream.engine.checkpoint.shared_state_registry``).

A file is one part per key group (``encode_parts``), and its handle lists each part's offset, so a
restore, rescaled or not, reads only the key groups its subtask owns and replays them in chain order
(``replay``). A new base is written after ``max_deltas`` deltas, or once the deltas together
outweigh the base, so a restore never replays an unbounded chain. Everything here is pure: the
files are written and read by the caller (checkpoint storage).
"""
from __future__ import annotations

import pickle
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from millstream.engine.runtime.state.state_records import KG_BYTES

BASE = "base"
DELTA = "delta"
DEFAULT_MAX_DELTAS = 10
# Past this many changed keys a delta saves little and the set of changed keys costs memory: the
# tracker stops recording and the next checkpoint is a base.
DEFAULT_MAX_TRACKED = 2_000_000

Record = tuple[bytes, "bytes | None"]  # (LMDB key, stored record or None: deleted)


@dataclass(frozen=True)
class SharedFile:
    """One file of a chain: its name in ``shared/``, kind, size, and ``index`` [(key group, offset, length)]."""

    name: str
    kind: str
    size: int
    index: tuple[tuple[int, int, int], ...]

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "size": self.size, "index": [list(i) for i in self.index]}

    @staticmethod
    def from_wire(d: Mapping[str, Any]) -> "SharedFile":
        kind = str(d["kind"])
        if kind not in (BASE, DELTA):
            raise ValueError(f"unknown shared state file kind {kind!r}")
        return SharedFile(str(d["name"]), kind, int(d["size"]), tuple((int(a), int(b), int(c)) for a, b, c in d["index"]))


Chain = tuple[SharedFile, ...]


@dataclass(frozen=True)
class SnapshotPlan:
    """What one checkpoint writes: a base (``changed`` is None) or a delta of ``changed`` keys on ``parent``."""

    checkpoint_id: int
    parent: Chain
    changed: Mapping[str, frozenset[bytes]] | None
    drops: int  # the tracker's count of cleared tables when it was taken

    @property
    def is_base(self) -> bool:
        return self.changed is None


@dataclass
class _Taken:
    changed: dict[str, set[bytes]] | None  # None: too many to track
    drops: int
    chain: Chain | None = None  # set once its files are written


@dataclass
class ChangeTracker:
    """What changed since the last completed checkpoint, and the chain that checkpoint left.

    ``record`` is called by the backend for each key it writes to or deletes from LMDB (write-backs,
    not every state access); ``table_cleared`` when a whole table is dropped, which a delta cannot
    express. ``plan`` (task thread, at the barrier) cuts the keys changed since the previous snapshot;
    ``written`` (writer thread) records the chain once the files exist; ``confirm`` (task thread, on
    the completion notification) makes that chain the parent of the next delta. A snapshot that never
    completes leaves its keys in the next delta, so failed checkpoints lose nothing."""

    max_deltas: int = DEFAULT_MAX_DELTAS
    max_tracked: int = DEFAULT_MAX_TRACKED
    changes: dict[str, set[bytes]] = field(default_factory=dict)
    _tracked: int = 0
    _overflow: bool = False
    _drops: int = 0
    _taken: dict[int, _Taken] = field(default_factory=dict)  # snapshots since the confirmed one
    _confirmed: Chain | None = None
    _confirmed_drops: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, name: str, lk: bytes) -> None:
        if self._overflow:
            return
        keys = self.changes.get(name)
        if keys is None:
            keys = self.changes[name] = set()
        n = len(keys)
        keys.add(lk)
        self._tracked += len(keys) - n
        if self._tracked > self.max_tracked:
            self._overflow = True  # the next snapshot is a base; stop paying for the set
            self.changes.clear()

    def table_cleared(self) -> None:
        self._drops += 1

    def plan(self, checkpoint_id: int) -> SnapshotPlan:
        """The snapshot to take now; the keys changed since the previous snapshot are cut off."""
        cut, self.changes, self._tracked = self.changes, {}, 0
        overflow, self._overflow = self._overflow, False
        with self._lock:
            # An overflowed interval's keys are unknown: no later delta may rest on a chain before it.
            self._taken[checkpoint_id] = _Taken(None if overflow else cut, self._drops)
            parent = self._confirmed
            if parent is None or self._drops != self._confirmed_drops or self._due_for_base(parent):
                return SnapshotPlan(checkpoint_id, (), None, self._drops)
            changed: dict[str, set[bytes]] = {}
            for taken in self._taken.values():
                if taken.changed is None:
                    return SnapshotPlan(checkpoint_id, (), None, self._drops)
                for name, keys in taken.changed.items():
                    changed.setdefault(name, set()).update(keys)
            return SnapshotPlan(checkpoint_id, parent, {n: frozenset(k) for n, k in changed.items()}, self._drops)

    def plan_cut(self, checkpoint_id: int, cut: dict[str, set[Any]]) -> tuple[SnapshotPlan, list[Mapping[str, set[Any]]]]:
        """As ``plan``, for change sets kept by the caller (the heap backend's tables): ``cut`` holds the
        keys changed since the previous snapshot. Returns the plan and, for a delta, the change sets of
        every snapshot since the last completed one, not merged (merging would copy every key on the
        task thread)."""
        with self._lock:
            self._taken[checkpoint_id] = _Taken(cut, self._drops)
            parent = self._confirmed
            if parent is None or self._drops != self._confirmed_drops or self._due_for_base(parent):
                return SnapshotPlan(checkpoint_id, (), None, self._drops), []
            sets = [t.changed for t in self._taken.values() if t.changed is not None]
            return SnapshotPlan(checkpoint_id, parent, {}, self._drops), sets

    def resume(self, chain: Chain) -> None:
        """After a restore from ``chain`` that put back exactly its state: the next snapshot may be a
        delta on it (rather than a base). What was recorded while restoring is dropped."""
        with self._lock:
            self.changes, self._tracked, self._overflow = {}, 0, False
            self._taken.clear()
            self._confirmed, self._confirmed_drops = chain, self._drops

    def _due_for_base(self, parent: Chain) -> bool:
        deltas = [f for f in parent if f.kind == DELTA]
        base = sum(f.size for f in parent if f.kind == BASE)
        return len(deltas) >= self.max_deltas or sum(f.size for f in deltas) > base

    def written(self, checkpoint_id: int, chain: Chain) -> None:
        with self._lock:
            taken = self._taken.get(checkpoint_id)
            if taken is not None:
                taken.chain = chain

    def confirm(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` completed: its chain is the parent of the next delta, and the keys
        of the snapshots up to it are in that chain. Ids of other snapshots (savepoints) are ignored."""
        with self._lock:
            taken = self._taken.get(checkpoint_id)
            if taken is None or taken.chain is None:
                return
            self._confirmed, self._confirmed_drops = taken.chain, taken.drops
            self._taken = {cid: t for cid, t in self._taken.items() if cid > checkpoint_id}

    def abort(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` will not complete. It may have been refused because a file of
        its chain was already deleted (the chain's checkpoint was subsumed before this task heard
        of a newer one): the next snapshot is a base, which refers to nothing older."""
        with self._lock:
            if checkpoint_id in self._taken:
                self._confirmed = None

    @property
    def confirmed(self) -> Chain | None:
        return self._confirmed


# -- files: one part per key group -------------------------------------------------------


def encode_parts(tables: Mapping[str, list[Record]]) -> list[tuple[int, bytes]]:
    """[(key group, pickle of {state name: [(LMDB key, record or None)]})] in key-group order, from
    each table's records sorted by LMDB key (which starts with the key group)."""
    by_kg: dict[int, dict[str, list[Record]]] = {}
    for name, rows in tables.items():
        start = 0
        while start < len(rows):
            prefix = rows[start][0][:KG_BYTES]
            end = start + 1
            while end < len(rows) and rows[end][0][:KG_BYTES] == prefix:
                end += 1
            by_kg.setdefault(int.from_bytes(prefix, "big"), {})[name] = rows[start:end]
            start = end
    return [(kg, pickle.dumps(by_kg[kg], protocol=pickle.HIGHEST_PROTOCOL)) for kg in sorted(by_kg)]


def chain_to_wire(chain: Iterable[SharedFile]) -> list[dict[str, Any]]:
    return [f.to_wire() for f in chain]


def chain_from_wire(wire: Iterable[Mapping[str, Any]]) -> Chain:
    return tuple(SharedFile.from_wire(d) for d in wire)


def replay(
    chain: Chain, key_groups: range, read_parts: Callable[[str, list[tuple[int, int, int]]], list[tuple[int, bytes]]]
) -> dict[str, list[tuple[bytes, bytes]]]:
    """The state of ``key_groups`` after base and deltas, in order: {state name: [(LMDB key, record)]}
    sorted by key. Only the parts of those key groups are read (``read_parts(name, ranges)``)."""
    merged: dict[int, dict[str, dict[bytes, bytes | None]]] = {}
    for f in chain:
        ranges = [r for r in f.index if r[0] in key_groups]
        if not ranges:
            continue
        for kg, payload in read_parts(f.name, ranges):
            part: dict[str, list[Record]] = pickle.loads(payload)
            tables = merged.setdefault(kg, {})
            for name, rows in part.items():
                if f.kind == BASE:
                    tables[name] = dict(rows)
                else:
                    tables.setdefault(name, {}).update(rows)
    out: dict[str, list[tuple[bytes, bytes]]] = {}
    for kg in sorted(merged):
        for name, records in merged[kg].items():
            live = [(lk, vb) for lk, vb in records.items() if vb is not None]
            live.sort()
            out.setdefault(name, []).extend(live)
    return out
