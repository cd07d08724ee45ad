"""The chain of files an incremental checkpoint's keyed state rests on, shared by both backends.

A checkpoint of an incremental backend writes a *base* (all its state) or a *delta* (what changed
since the last *completed* checkpoint) as a file in the job's ``shared/`` directory, and its state
handle lists the chain ``[base, delta, ...]`` it is rebuilt from (``SharedFile``: name, kind, size
and where each part is). ``ChangeTracker`` decides base or delta at each barrier (a new base once a
restore would replay too much, after a table was cleared or an aborted checkpoint, and when there is
no completed chain yet; a chain of ``max_deltas`` deltas gets a base, or, where the writer can read
the chain's files, rebases a few key groups per checkpoint in a *partial base*: ``rolled_compaction``;
``merge_start`` is the older rule, merging its newest files), remembers the chain each snapshot wrote,
and moves the parent on when the completion notification arrives. A task's files carry their own
index (``SharedFile.footer``), so a checkpoint's state file lists a long chain in a few KB. The coordinator's
``SharedStateRegistry`` counts references to the files. What a file holds is each backend's own:
``incremental`` (the on-disk backend's records, a part per key group) and ``heap_incremental``.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Container, Iterable, Iterator, Mapping

import msgpack

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
#: records a merge of several intervals' changes copies per call (``MergedChanges``), so one C call
#: holds the interpreter lock for a few milliseconds at most while the task thread may wait for it
MERGE_BLOCK = 65_536
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
    # A base of only the key groups its index lists (a rolled compaction's file, ``rolled_compaction``); an
    # empty part marks a key group that has no state. A whole base (False) is a base for every key group.
    partial: bool = False
    # (offset, length) of the file's own index, sealed in it as a part of key group ``FOOTER``: the wire
    # form then leaves the index out (a rolled chain of ~170 files of 64 parts each was 155 KB in every
    # checkpoint's state file, more than a 1 % delta), and a reader loads it (``with_indexes``).
    footer: tuple[int, int] | None = None

    @property
    def indexed(self) -> bool:
        """Whether ``index`` is here: None (from the wire form) while only the file's footer holds it."""
        return self.index is not None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name, "kind": self.kind, "size": self.size}
        if self.footer is not None:
            wire["footer"] = list(self.footer)
        else:
            wire["index"] = [list(i) for i in self.index]
        if self.entries >= 0:
            wire["entries"] = self.entries
        if self.grouped:
            wire["grouped"] = True
        if self.partial:
            wire["partial"] = True
        return wire

    @staticmethod
    def from_wire(d: Mapping[str, Any]) -> "SharedFile":
        kind = str(d["kind"])
        if kind not in (BASE, DELTA):
            raise ValueError(f"unknown shared state file kind {kind!r}")
        footer = None
        if "footer" in d:
            offset, length = d["footer"]
            footer = (int(offset), int(length))
        index = None if footer is not None else tuple((int(a), int(b), int(c)) for a, b, c in d["index"])
        partial = d.get("partial") is True
        if partial and (kind != BASE or d.get("grouped") is not True):
            raise ValueError("only a base of grouped parts can be partial")
        return SharedFile(str(d["name"]), kind, int(d["size"]), index, int(d.get("entries", -1)), d.get("grouped") is True, partial, footer)  # type: ignore[arg-type]


FOOTER = -1  # the key group a file's own index is sealed under (``SharedFile.footer``)


def encode_index(index: Iterable[tuple[int, int, int]]) -> bytes:
    """A file's index as its footer: the triples, flat, in msgpack (data, never code)."""
    return msgpack.packb([v for entry in index for v in entry])


def decode_index(payload: bytes, size: int) -> tuple[tuple[int, int, int], ...]:
    """The index in a footer written by ``encode_index``, each part inside the file's ``size`` bytes."""
    flat = msgpack.unpackb(payload)
    if not isinstance(flat, list) or len(flat) % 3 or not all(type(v) is int for v in flat):
        raise ValueError("a shared state file's index is malformed")
    index = tuple((flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3))
    if any(o < 0 or n < 0 or o + n > size for _, o, n in index):
        raise ValueError("a shared state file's index points outside the file")
    return index


def written_file(name: str, kind: str, size: int, index: Iterable[tuple[int, int, int]]) -> SharedFile:
    """The record of a file just written, whose index may end with its footer's entry (key group
    ``FOOTER``, ``storage.write_shared_file``'s ``footer``)."""
    entries = tuple(index)
    if entries and entries[-1][0] == FOOTER:
        return SharedFile(name, kind, size, entries[:-1], footer=(entries[-1][1], entries[-1][2]))
    return SharedFile(name, kind, size, entries)


def with_indexes(chain: Chain, read_file: Callable[[str, list[tuple[int, int, int]]], Iterable[tuple[int, bytes]]]) -> Chain:
    """``chain`` with the index of every file that has it only in its footer read in."""
    out = []
    for f in chain:
        if not f.indexed:
            (_, payload), = read_file(f.name, [(FOOTER, *f.footer)])  # type: ignore[misc]
            f = replace(f, index=decode_index(payload, f.size))
        out.append(f)
    return tuple(out)


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
    # A delta whose writer then rebases a few key groups (``rolled_compaction``) in a partial base: the chain
    # is compacted a few key groups per checkpoint instead of all at once (the heap backend's).
    rolled: bool = False
    live: int | None = None  # entries in the backend at the barrier, where the planner counted them

    @property
    def is_base(self) -> bool:
        return self.changed is None

    @property
    def compact(self) -> bool:
        return self.merge_from is not None


class MergedChanges(Mapping[str, Mapping[bytes, Any]]):
    """The records of several intervals' changes ({state: {LMDB key: record}}, in checkpoint order: a
    later record of a key wins), merged when first read. The planner runs on the task thread at the
    barrier, where merging a million records (tens of milliseconds) was part of the task's pause;
    the delta's writer reads them, on its own thread, a block of records per call so it never holds
    the interpreter lock for long (``MERGE_BLOCK``)."""

    def __init__(self, parts: list[Mapping[str, Mapping[bytes, Any]]]) -> None:
        self._parts: list[Mapping[str, Mapping[bytes, Any]]] | None = parts
        self._merged: dict[str, dict[bytes, Any]] = {}

    def _merge(self) -> dict[str, dict[bytes, Any]]:
        if self._parts is not None:
            merged = self._merged
            for part in self._parts:
                for name, records in part.items():
                    target = merged.setdefault(name, {})
                    items = iter(records.items())
                    while block := list(itertools.islice(items, MERGE_BLOCK)):
                        target.update(block)
            self._parts = None
        return self._merged

    def __getitem__(self, name: str) -> Mapping[bytes, Any]:
        return self._merge()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._merge())

    def __len__(self) -> int:
        return len(self._merge())

    @property
    def merged(self) -> bool:
        """Whether the parts were merged (read) yet."""
        return self._parts is None


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

    def plan(self, checkpoint_id: int, live: int | None = None, merge: bool = False, rolled: bool = False) -> SnapshotPlan:
        """The snapshot to take now; the keys changed since the previous snapshot are cut off, with
        their records (``record``). ``live``: entries in the backend now, for the base rule.

        ``merge``: the writer can merge the newest files of the chain from the files themselves (the
        on-disk backend's, ``incremental.merge_groups``); with ``rolled`` it compacts a few key groups
        per checkpoint instead (``SnapshotPlan.rolled``), and no base is due while the chain is sound. A chain that reached ``max_deltas`` then
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
            rolls = merge and rolled  # compacted a few key groups at a time by the writer (rolled_compaction)
            if merge and not rolls:
                start = merge_start(parent, live, self.max_deltas + 1, self._due_for_base(parent, live))
                if start == 0:
                    return SnapshotPlan(checkpoint_id, (), None, self._drops)
            elif not merge and self._due_for_base(parent, live):
                return SnapshotPlan(checkpoint_id, (), None, self._drops)
            taken = [t.changed for _, t in sorted(self._taken.items())]
            if any(c is None for c in taken):
                return SnapshotPlan(checkpoint_id, (), None, self._drops)
            if len(taken) == 1:  # the usual case: only this interval's changes, handed over as they are
                return SnapshotPlan(checkpoint_id, parent, taken[0], self._drops, merge_from=start, rolled=rolls, live=live)
            # The barrier of this checkpoint came before the task heard that the previous one completed:
            # both intervals' records go into the delta, merged by the writer (``MergedChanges``).
            merged = MergedChanges(taken)  # type: ignore[arg-type]
            return SnapshotPlan(checkpoint_id, parent, merged, self._drops, merge_from=start, rolled=rolls, live=live)

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
            sets = [t.changed for t in self._taken.values() if t.changed is not None]
            if compact and all(f.grouped for f in parent):  # compacted a few key groups at a time (rolled_compaction)
                return SnapshotPlan(checkpoint_id, parent, {}, self._drops, rolled=True), sets
            if not compact and self._due_for_base(parent):
                return SnapshotPlan(checkpoint_id, (), None, self._drops), []
            start = merge_start(parent, live, self.max_deltas, self._due_for_base(parent)) if compact else None
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


def key_group_starts(chain: Chain) -> tuple[int, dict[int, int]]:
    """Where a restore of each key group starts reading ``chain``: (the newest whole base, or 0, for
    every key group without one of its own; {key group: its newest partial base after that})."""
    default = max((i for i, f in enumerate(chain) if f.kind == BASE and not f.partial), default=0)
    own: dict[int, int] = {}
    for i in range(default + 1, len(chain)):
        if chain[i].partial:
            for r in chain[i].index:
                own[r[0]] = i
    return default, own


def replay_reads(chain: Chain, owned: Container[int] | None = None) -> Iterator[tuple[int, SharedFile, list[tuple[int, int, int]]]]:
    """(position, file, index entries to read) of ``chain`` in order, for a replay of the key groups ``owned``
    (None: all): of a grouped file only the parts of key groups owned and at or after their start
    (``key_group_starts``); a file in the older, ungrouped format whole."""
    if not all(f.indexed for f in chain):
        raise ValueError("a chain's indexes must be read in first (with_indexes)")
    default, own = key_group_starts(chain)
    for i in range(default, len(chain)):
        f = chain[i]
        if f.grouped:
            index = [r for r in f.index if (owned is None or r[0] in owned) and own.get(r[0], default) <= i]
        else:
            index = list(f.index)
        if index:
            yield i, f, index


def chain_sizes(chain: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(bytes of the newest file, bytes of the whole chain) of a chain on the wire: what a checkpoint
    wrote and what its state refers to."""
    files = list(chain)
    return (files[-1]["size"] if files else 0), sum(f["size"] for f in files)


def chain_to_wire(chain: Iterable[SharedFile]) -> list[dict[str, Any]]:
    return [f.to_wire() for f in chain]


def chain_from_wire(wire: Iterable[Mapping[str, Any]]) -> Chain:
    return tuple(SharedFile.from_wire(d) for d in wire)
