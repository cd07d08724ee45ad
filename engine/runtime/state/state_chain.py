"""The chain of files an incremental checkpoint's keyed state rests on, shared by both backends.

A checkpoint of an incremental backend writes a *base* (all its state) or a *delta* (what changed
since the last *completed* checkpoint) as a file in the job's ``shared/`` directory, and its state
handle lists the chain ``[base, delta, ...]`` it is rebuilt from (``SharedFile``: name, kind, size
and where each part is). ``ChangeTracker`` decides base or delta at each barrier (a new base once a
restore would replay too much, after a table was cleared or an aborted checkpoint, and when there is
no completed chain yet; a chain of ``max_deltas`` deltas gets a base, or, where the writer can read
the chain's files, merges its newest ones: ``merge_start``), remembers the chain each snapshot wrote, and
moves the parent on when the completion notification arrives. The coordinator's
``SharedStateRegistry`` counts references to the files. What a file holds is each backend's own:
``incremental`` (the on-disk backend's records, a part per key group) and ``heap_incremental``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

BASE = "base"
DELTA = "delta"
DEFAULT_MAX_DELTAS = 10
# Key groups a merge of grouped files (either backend's) reads and holds at a time, freed in one go (one
# hold of the interpreter lock) when the next start. 16 of a slot's 64 at 1.5 M keys were 375,000 heap
# entries, whose freeing held the lock 54 ms on a slow 2-core machine (a barrier waited that long); 4: 7 ms.
MERGE_KEY_GROUPS = 4
# Past this many changed keys a delta saves little and the set of changed keys costs memory: the
# tracker stops recording and the next checkpoint is a base.
DEFAULT_MAX_TRACKED = 2_000_000
# The on-disk backend's tracker keeps each changed key's record as written back (``record``), so a
# delta is written without reading LMDB; past this many bytes of them it gives up as above.
DEFAULT_MAX_TRACKED_BYTES = 64 << 20
_ENTRY_OVERHEAD = 100  # bytes a dict entry and its key and record objects cost besides their data
_MISSING = object()



@dataclass(frozen=True)
class SharedFile:
    """One file of a chain: its name in ``shared/``, kind, size, ``index`` [(key group, offset, length)]
    and, where the writer counted them (the heap backend's files), its ``entries`` (values and
    deletions; -1: not counted, e.g. a chain written before they were). ``grouped`` (the heap
    backend's files since issue 16's change 8): each part holds keys of the key group the index lists
    it under, possibly several parts per key group; a heap file without it numbers its parts in order
    and is read whole. The on-disk backend's files are always a part per key group."""

    name: str
    kind: str
    size: int
    index: tuple[tuple[int, int, int], ...]
    entries: int = -1
    grouped: bool = False

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name, "kind": self.kind, "size": self.size, "index": [list(i) for i in self.index]}
        if self.entries >= 0:
            wire["entries"] = self.entries
        if self.grouped:
            wire["grouped"] = True
        return wire

    @staticmethod
    def from_wire(d: Mapping[str, Any]) -> "SharedFile":
        kind = str(d["kind"])
        if kind not in (BASE, DELTA):
            raise ValueError(f"unknown shared state file kind {kind!r}")
        index = tuple((int(a), int(b), int(c)) for a, b, c in d["index"])
        return SharedFile(str(d["name"]), kind, int(d["size"]), index, int(d.get("entries", -1)), d.get("grouped") is True)


Chain = tuple[SharedFile, ...]


@dataclass(frozen=True)
class SnapshotPlan:
    """What one checkpoint writes: a base (``changed`` is None) or a delta of ``changed`` keys on ``parent``."""

    checkpoint_id: int
    parent: Chain
    # A delta's changed keys per state: the on-disk backend's map each to its record as of the
    # barrier (None: deleted); the heap backend's plans leave it empty and hand over their own sets.
    changed: Mapping[str, Mapping[bytes, bytes | None]] | None
    drops: int  # the tracker's count of cleared tables when it was taken
    # A delta whose writer first merges ``parent[merge_from:]`` into one file, read back from the chain's
    # files rather than from the live state (the heap backend's materialisation): the chain becomes
    # [*parent[:merge_from], merged, delta]; the merged file is a base when merge_from is 0.
    merge_from: int | None = None

    @property
    def is_base(self) -> bool:
        return self.changed is None

    @property
    def compact(self) -> bool:
        return self.merge_from is not None


@dataclass
class _Taken:
    changed: dict[str, Any] | None  # None: too many to track
    drops: int
    chain: Chain | None = None  # set once its files are written


@dataclass
class ChangeTracker:
    """What changed since the last completed checkpoint, and the chain that checkpoint left.

    ``record`` is called by the on-disk backend for each key it writes to or deletes from LMDB
    (write-backs, not every state access), with the record written: the last one before the barrier
    is the key's record at the barrier (the barrier's flush writes back everything dirty), so a
    delta is written from the tracker alone, with no read of LMDB and no read transaction held
    open while the task writes on (issue 16). ``table_cleared`` when a whole table is dropped,
    which a delta cannot express. ``plan`` (task thread, at the barrier) cuts the keys changed since the previous snapshot;
    ``written`` (writer thread) records the chain once the files exist; ``confirm`` (task thread, on
    the completion notification) makes that chain the parent of the next delta. A snapshot that never
    completes leaves its keys in the next delta, so failed checkpoints lose nothing."""

    max_deltas: int = DEFAULT_MAX_DELTAS
    max_tracked: int = DEFAULT_MAX_TRACKED
    max_tracked_bytes: int = DEFAULT_MAX_TRACKED_BYTES
    # The backend recorded every change since it was empty (the heap backend's tables): its first
    # snapshot may be a delta on the empty chain instead of a base of everything.
    from_empty: bool = False
    changes: dict[str, dict[bytes, bytes | None]] = field(default_factory=dict)
    _tracked: int = 0
    _tracked_bytes: int = 0
    _overflow: bool = False
    _drops: int = 0
    _taken: dict[int, _Taken] = field(default_factory=dict)  # snapshots since the confirmed one
    _confirmed: Chain | None = None
    _confirmed_drops: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.from_empty:
            self._confirmed = ()

    def record(self, name: str, lk: bytes, vb: bytes | None) -> None:
        """Key ``lk`` of state ``name`` was written back as ``vb`` (None: deleted)."""
        if self._overflow:
            return
        keys = self.changes.get(name)
        if keys is None:
            keys = self.changes[name] = {}
        old = keys.get(lk, _MISSING)
        keys[lk] = vb
        if old is _MISSING:
            self._tracked += 1
            self._tracked_bytes += len(lk) + _ENTRY_OVERHEAD + (len(vb) if vb is not None else 0)
        else:
            self._tracked_bytes += (len(vb) if vb is not None else 0) - (len(old) if old is not None else 0)
        if self._tracked > self.max_tracked or self._tracked_bytes > self.max_tracked_bytes:
            self._overflow = True  # the next snapshot is a base; stop paying for the records
            self.changes.clear()

    def record_many(self, name: str, records: Mapping[bytes, bytes | None]) -> None:
        """``record`` for many keys of state ``name`` at once (a barrier's dirty cache entries); the
        byte count takes every record as new, an overestimate where one replaces another."""
        if self._overflow or not records:
            return
        keys = self.changes.get(name)
        if keys is None:
            keys = self.changes[name] = {}
        n = len(keys)
        keys.update(records)
        self._tracked += len(keys) - n
        self._tracked_bytes += sum(map(len, records)) + sum(len(vb) for vb in records.values() if vb is not None) + _ENTRY_OVERHEAD * len(records)
        if self._tracked > self.max_tracked or self._tracked_bytes > self.max_tracked_bytes:
            self._overflow = True
            self.changes.clear()

    def table_cleared(self) -> None:
        self._drops += 1

    def plan(self, checkpoint_id: int, live: int | None = None, merge: bool = False) -> SnapshotPlan:
        """The snapshot to take now; the keys changed since the previous snapshot are cut off, with
        their records (``record``). ``live``: entries in the backend now, for the base rule.

        ``merge``: the writer can merge the newest files of the chain from the files themselves (the
        on-disk backend's, ``incremental.merge_groups``). A chain that reached ``max_deltas`` then
        merges its newest files (``merge_start``, ``SnapshotPlan.merge_from``) instead of writing
        every record again as a base; a base is still taken, from the backend, when a restore would
        replay more than twice the live entries (or an uncounted chain is due), which ``merge_start``
        answers with 0."""
        cut, self.changes, self._tracked, self._tracked_bytes = self.changes, {}, 0, 0
        overflow, self._overflow = self._overflow, False
        with self._lock:
            # An overflowed interval's keys are unknown: no later delta may rest on a chain before it.
            self._taken[checkpoint_id] = _Taken(None if overflow else cut, self._drops)
            parent = self._confirmed
            if parent is None or self._drops != self._confirmed_drops:
                return SnapshotPlan(checkpoint_id, (), None, self._drops)
            start = None
            if merge:
                start = merge_start(parent, live, self.max_deltas + 1, self._due_for_base(parent, live))
                if start == 0:
                    return SnapshotPlan(checkpoint_id, (), None, self._drops)
            elif self._due_for_base(parent, live):
                return SnapshotPlan(checkpoint_id, (), None, self._drops)
            taken = [t.changed for _, t in sorted(self._taken.items())]
            if any(c is None for c in taken):
                return SnapshotPlan(checkpoint_id, (), None, self._drops)
            if len(taken) == 1:  # the usual case: only this interval's changes, handed over as they are
                return SnapshotPlan(checkpoint_id, parent, taken[0], self._drops, merge_from=start)
            changed: dict[str, dict[bytes, bytes | None]] = {}
            for c in taken:  # in checkpoint order: a later record of a key wins
                for name, records in c.items():  # type: ignore[union-attr]
                    changed.setdefault(name, {}).update(records)
            return SnapshotPlan(checkpoint_id, parent, changed, self._drops, merge_from=start)

    def plan_cut(
        self, checkpoint_id: int, cut: dict[str, set[Any]], compact: bool = False, live: int | None = None
    ) -> tuple[SnapshotPlan, list[Mapping[str, set[Any]]]]:
        """As ``plan``, for change sets kept by the caller (the heap backend's tables): ``cut`` holds the
        keys changed since the previous snapshot. Returns the plan and, for a delta, the change sets of
        every snapshot since the last completed one, not merged (merging would copy every key on the
        task thread). ``compact``: the writer can merge files of a chain that is still sound from the
        files themselves, so no base is ever due; the plan is a delta, and ``merge_start`` says which
        of the chain's files its writer merges first (``SnapshotPlan.merge_from``). ``live``: entries
        in the backend's tables now, against which the chain's entries are weighed."""
        with self._lock:
            self._taken[checkpoint_id] = _Taken(cut, self._drops)
            parent = self._confirmed
            if parent is None or self._drops != self._confirmed_drops:
                return SnapshotPlan(checkpoint_id, (), None, self._drops), []
            if not compact and self._due_for_base(parent):
                return SnapshotPlan(checkpoint_id, (), None, self._drops), []
            start = merge_start(parent, live, self.max_deltas, self._due_for_base(parent)) if compact else None
            sets = [t.changed for t in self._taken.values() if t.changed is not None]
            return SnapshotPlan(checkpoint_id, parent, {}, self._drops, merge_from=start), sets

    def resume(self, chain: Chain) -> None:
        """After a restore from ``chain`` that put back exactly its state: the next snapshot may be a
        delta on it (rather than a base). What was recorded while restoring is dropped."""
        with self._lock:
            self.changes, self._tracked, self._overflow = {}, 0, False
            self._taken.clear()
            self._confirmed, self._confirmed_drops = chain, self._drops

    def _due_for_base(self, parent: Chain, live: int | None = None) -> bool:
        if parent and parent[0].kind == DELTA:  # begun from empty (``from_empty``): its first delta stands for the base
            bases, deltas = parent[:1], parent[1:]
        else:
            bases, deltas = tuple(f for f in parent if f.kind == BASE), tuple(f for f in parent if f.kind == DELTA)
        if len(deltas) >= self.max_deltas:
            return True
        if live is not None and parent and all(f.entries >= 0 for f in parent):
            # Counted chains (``merge_start``'s rule): a base only once a restore would replay more
            # than twice the live entries. Under a stream of new keys each delta outweighs the base
            # before it while overwriting nothing, and the byte rule below re-read the whole state
            # every second or third checkpoint.
            return sum(f.entries for f in parent) > 2 * live
        return sum(f.size for f in deltas) > sum(f.size for f in bases)

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


def merge_start(parent: Chain, live: int | None, max_files: int = DEFAULT_MAX_DELTAS, due: bool = False) -> int | None:
    """Which files of ``parent`` a compacting writer merges into one before it appends its delta: the
    index of the first (0: all of them, into a new base), or None (none).

    The work must follow what changed, not what exists (issue 16). Rewriting the whole chain whenever
    the deltas outweighed the base did not: under a stream of new keys every delta outweighs its
    share, and every second or third checkpoint rewrote all the state on the writer thread, against
    the task for the interpreter lock, for nothing (new keys overwrite nothing, so the merged file is
    as big as the files it replaces). Merging pays only against overwrites and deletions, and against
    long chains. So the whole chain is rewritten as a base only when its entries (values and
    deletions, counted by the writers) pass twice the ``live`` entries, i.e. when a restore would
    read more than twice the state (for a chain whose entries were not counted: when ``due``, the
    byte rule of ``ChangeTracker._due_for_base``). A chain that reached ``max_files`` merges its
    newest files, as an LSM tree's size-tiered compaction does: at least the last two, and further
    back while the file before them is no bigger than they are together, so the big old files are
    rarely rewritten and the chain's sizes fall geometrically."""
    n = len(parent)
    if n < 2:
        return None
    counted = all(f.entries >= 0 for f in parent)
    if (counted and live is not None and sum(f.entries for f in parent) > 2 * live) or (not counted and due):
        return 0
    if n < max_files:
        return None
    start, newer = n - 2, parent[-1].size + parent[-2].size
    for i in range(n - 3, -1, -1):
        if parent[i].size > newer:
            break
        start, newer = i, newer + parent[i].size
    return min(start, max(0, max_files - 2))


def extend(plan: SnapshotPlan, new: SharedFile, merged: SharedFile | None = None) -> Chain:
    """The chain a snapshot of ``plan`` leaves once it wrote ``new``: a base starts a chain of its own;
    ``merged``, the file its writer merged ``parent[merge_from:]`` into, takes their place."""
    if plan.is_base:
        return (new,)
    if merged is not None:
        return (*plan.parent[: plan.merge_from], merged, new)
    return (*plan.parent, new)


def chain_sizes(chain: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(bytes of the newest file, bytes of the whole chain) of a chain on the wire: what a checkpoint
    wrote and what its state refers to."""
    files = list(chain)
    return (files[-1]["size"] if files else 0), sum(f["size"] for f in files)


def chain_to_wire(chain: Iterable[SharedFile]) -> list[dict[str, Any]]:
    return [f.to_wire() for f in chain]


def chain_from_wire(wire: Iterable[Mapping[str, Any]]) -> Chain:
    return tuple(SharedFile.from_wire(d) for d in wire)
