"""Incremental checkpoints of the heap keyed backend: a changelog of keys and copy-on-write deltas.

Millstream's version of FLIP-158 (the changelog state backend) for state held in dicts, designed
around the interpreter lock:

* **What changed.** With incremental checkpoints on, the heap backend hands out ``TrackedTable``
  dicts, which record every write (``t[k] = v``, ``pop``, ``setdefault``, ...) in their table's
  *change log*: a dict of each key changed since the last cut to its value after the change (``ABSENT``:
  deleted). Tables whose values are changed in place (list, map and window state: the
  ``MUTABLE_KINDS``) log a read too, since the caller may append to what it read. Value, reducing
  and aggregating state is written back whole (``t[k] = v``), so its reads cost nothing extra.
* **At the barrier** (task thread) the change logs are swapped for empty ones (``ChangeTracker.plan``
  and ``cut``): O(tables), whatever the state's size. A log cut off is never written again, and it
  holds the barrier's value of each of its keys: a write after the barrier replaces the table's
  object, not the log's. So the writer reads the values from the logs, not from the tables, with
  no lock and no lookup (issue 16, change 19: the lookups were a fifth of the writer's time).
* **Off the task thread** the writer thread encodes the logs' keys and values in slices and writes
  them as the parts of a shared file. Only a value changed *in place* after the barrier could reach
  it changed: before the task thread hands out a value that is still the barrier's object and could
  be changed in place (not a number, a string or a tuple of those), it saves a deep copy
  (``CopyOnWrite.preserve``), and the writer leaves the key out of the log's slice and writes the
  copy. The writer holds the snapshot's lock, and so the interpreter lock, for one slice of such
  values at a time, so the task thread waits at most one slice's pickling; numbers never need it.
* **Bases** (materialisation), **rolled over the key groups**. The tables record every write from
  empty, so the first checkpoint is a delta on the empty chain. After that each checkpoint's writer
  may rebase a few key groups (``heap_state_files.rebase``): a *partial base* of their state, read from the chain's
  files and the new delta on the writer thread, which replaces their parts of every older file
  (``rolled_compaction.rolled_due`` chooses them, paid for by the delta's bytes, so a checkpoint writes
  about twice what changed and no checkpoint rewrites all the state; ``rolled_compaction.prune`` drops a
  file once no key group reads it). Only when no sound chain is left (an aborted checkpoint, a
  cleared table, no local directory to read from) is a whole base taken from the live tables,
  pickled in a forked copy-on-write child as the full heap snapshot is (``forked_snapshot``); at a
  URL, where a forked child must not open a connection, the writer takes a delta of every key on
  the empty chain instead (``EVERYTHING``).
  Chains written before partial bases (ungrouped files) are still compacted whole (``heap_state_files.merge``).

The files, their frames and what reads them back (replays, merges, rebases) are
``heap_state_files``.
"""
from __future__ import annotations

import functools
import itertools
import operator
import pickle
import threading
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from millstream.engine.runtime.key_group_batch import group_by_key_group, group_keys
from millstream.engine.runtime.state import state_columns
from millstream.engine.runtime.state.heap_state_files import ABSENT, KeyGroups, Parts, columns_frame

# Kinds of state whose values callers change in place after reading them (``HeapListState.add``
# appends to the list ``setdefault`` returned; the window operator mutates its per-key dicts).
MUTABLE_KINDS = frozenset({"list", "map", "window", "ttl-list", "ttl-map"})
CHUNK = 2_000  # keys per part of an ungrouped delta
GROUP_SLICE = 8_192  # changed keys a delta's writer encodes (and, for pickled values, holds the lock for) at a time
HASH_BLOCK = 8 * GROUP_SLICE  # changed keys the writer takes from the change logs and hashes at a time
_SCALARS = frozenset({int, float, str, bytes, bool, complex, type(None)})
_SCALARS_OR_TUPLE = _SCALARS | {tuple}
_TUPLE = frozenset({tuple})
_present = functools.partial(operator.is_not, ABSENT)
_UNLOGGED = object()  # a key no pending change log holds


class _Everything:
    """The change log of a delta of every key (``EVERYTHING``): taken where a base is due but cannot be
    forked. Every key is pending and its barrier value is the table's until the task changes it: the
    task saves the barrier value of any key it touches (written or handed out) before the writer has
    read it (a key added since saves "absent", written as a deletion, harmless on a chain that starts
    here), and the writer lists the keys the table holds when it starts and looks their values up."""

    def __contains__(self, key: Any) -> bool:
        return True

    def __repr__(self) -> str:
        return "EVERYTHING"


EVERYTHING: Any = _Everything()


def immutable(value: Any) -> bool:
    t = type(value)
    if t in _SCALARS:
        return True
    if t is tuple or t is frozenset:
        return all(immutable(v) for v in value)
    return False


def _all_immutable(values: list[Any]) -> bool:
    """Whether no value of ``values`` (``ABSENT`` allowed) can change in place: scalars, and tuples of
    scalars, told in C loops over the list; anything else says False (the caller then asks ``immutable``
    value by value)."""
    kinds = set(map(type, values))
    absent = object in kinds  # ABSENT (a bare object() holds nothing that can change)
    kinds.discard(object)
    if kinds <= _SCALARS:
        return True
    if kinds == _TUPLE:  # a reduce's usual state: the tuples' fields in one C loop
        fields = itertools.chain.from_iterable(filter(_present, values) if absent else values)
        return set(map(type, fields)) <= _SCALARS
    if kinds <= _SCALARS_OR_TUPLE:
        return set(map(type, itertools.chain.from_iterable(v for v in values if type(v) is tuple))) <= _SCALARS
    return False


class CopyOnWrite:
    """A snapshot's view of one table while its writer thread reads the change logs cut at the barrier
    (``pending``, oldest first: several when checkpoints overlap) and the task thread goes on.

    ``pending`` holds each changed key's barrier value, which no later write can change: only a value
    changed in place can, so the task saves a deep copy of such a value before it hands it out
    (``preserve``), and the writer takes the copy instead (``saved``). With ``EVERYTHING`` pending the
    values are the table's, so the task saves a key's value before any change of it too."""

    __slots__ = ("lock", "pending", "everything", "done", "saved")

    def __init__(self, lock: threading.Lock, pending: Iterable[Any]) -> None:
        self.lock = lock
        self.pending = tuple(pending)  # never changed: the tracker has swapped in new logs
        self.everything = any(p is EVERYTHING for p in self.pending)
        self.done: set[Any] = set()  # keys the writer has written as pickles or the task has saved
        self.saved: dict[Any, Any] = {}  # key -> value at the barrier (ABSENT: it had none)

    def barrier_value(self, key: Any) -> Any:
        """``key``'s value in the newest pending log that holds it (``_UNLOGGED``: none does)."""
        for log in reversed(self.pending):
            value = log.get(key, _UNLOGGED)
            if value is not _UNLOGGED:
                return value
        return _UNLOGGED

    def preserve(self, table: dict[Any, Any], key: Any) -> None:
        """On the task thread, before ``key``'s value is handed out (and, ``everything``, before it changes)."""
        if key in self.done:
            return
        if self.everything:
            with self.lock:
                if key in self.done:
                    return
                self.done.add(key)
                value = dict.get(table, key, ABSENT)
                if value is not ABSENT and not immutable(value):  # it may be changed in place from now on
                    value = _deep_copy(value)
                self.saved[key] = value
            return
        value = self.barrier_value(key)
        # Only the barrier's own object, still in the table, can be changed in place through it.
        if value is _UNLOGGED or value is ABSENT or dict.get(table, key, ABSENT) is not value or immutable(value):
            return
        with self.lock:
            if key in self.done:
                return
            self.done.add(key)
            self.saved[key] = _deep_copy(value)

    def preserve_many(self, table: dict[Any, Any], keys: set[Any]) -> None:
        """``preserve`` for each of ``keys`` (a batch about to be read and written), in C loops over the
        batch where it can: a batch of numbers (the usual reduce) asks only for its values' types."""
        fresh = keys - self.done if self.done else keys
        if not self.everything:
            # only keys of the pending logs have barrier values (dict views intersect in C)
            if len(self.pending) == 1:
                fresh = fresh & self.pending[0].keys()
            else:
                fresh = set().union(*(fresh & log.keys() for log in self.pending))
            if fresh and not _all_immutable(list(map(dict.get.__get__(table), fresh, itertools.repeat(ABSENT)))):
                for key in fresh:
                    self.preserve(table, key)
            return
        if not fresh:
            return
        values = list(map(dict.get.__get__(table), fresh, itertools.repeat(ABSENT)))
        with self.lock:
            need = fresh - self.done
            if not need:
                return
            if len(need) != len(fresh):
                values = list(map(dict.get.__get__(table), need, itertools.repeat(ABSENT)))
            self.done |= need
            self.saved.update(zip(need, _detached(values)))


def _detached(values: list[Any]) -> list[Any]:
    """``values`` with each one that may be changed in place replaced by a deep copy (``ABSENT`` kept)."""
    if _all_immutable(values):
        return values
    return [v if v is ABSENT or immutable(v) else _deep_copy(v) for v in values]


def _deep_copy(value: Any) -> Any:
    # through pickle: what a checkpoint writes must survive it anyway, and it is the fastest deep copy
    return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))


class TrackedTable(dict):
    """A state table that logs the keys written (and, for ``deep`` tables, read) since the last cut,
    each with its value after the change (``changed``)."""

    __slots__ = ("name", "changed", "cow", "cow_writes", "deep", "on_clear")

    def __init__(self, name: str, deep: bool, on_clear: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.name = name
        self.deep = deep  # values are changed in place: reads count as changes
        self.changed: dict[Any, Any] = {}  # key -> value after its last change (ABSENT: deleted)
        # The views of the snapshots in flight (several, when checkpoints overlap); None when none is.
        self.cow: tuple[CopyOnWrite, ...] | None = None
        self.cow_writes: tuple[CopyOnWrite, ...] | None = None  # the views that must see writes too (EVERYTHING)
        self.on_clear = on_clear

    def __reduce__(self) -> Any:
        # A snapshot or savepoint holds a plain dict: backend-neutral, and without the change log.
        return dict, (), None, None, iter(dict.items(self))

    def _handing_out(self, key: Any) -> None:
        for view in self.cow or ():
            view.preserve(self, key)

    def _writing(self, key: Any) -> None:
        for view in self.cow_writes or ():
            view.preserve(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        if self.cow_writes is not None:
            self._writing(key)
        dict.__setitem__(self, key, value)
        self.changed[key] = value

    def __delitem__(self, key: Any) -> None:
        if self.cow_writes is not None:
            self._writing(key)
        dict.__delitem__(self, key)
        self.changed[key] = ABSENT

    def pop(self, key: Any, *default: Any) -> Any:
        if not dict.__contains__(self, key):
            return dict.pop(self, key, *default)
        if self.cow_writes is not None:
            self._writing(key)
        value = dict.pop(self, key)
        self.changed[key] = ABSENT
        return value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            if self.cow is not None:
                self._handing_out(key)
            value = dict.__getitem__(self, key)
        else:
            if self.cow_writes is not None:
                self._writing(key)
            value = dict.setdefault(self, key, default)
        self.changed[key] = value
        return value

    # A read hands out the value object: one that is changed in place must be saved first (``preserve``
    # copies only values that are not immutable), and for ``deep`` tables the read counts as a change.
    def get(self, key: Any, default: Any = None) -> Any:
        if self.cow is not None:
            self._handing_out(key)
        if self.deep and dict.__contains__(self, key):
            value = self.changed[key] = dict.__getitem__(self, key)
            return value
        return dict.get(self, key, default)

    def __getitem__(self, key: Any) -> Any:
        if self.cow is not None:
            self._handing_out(key)
        value = dict.__getitem__(self, key)
        if self.deep:
            self.changed[key] = value
        return value

    def update(self, *args: Any, **kw: Any) -> None:
        other = args[0] if len(args) == 1 and not kw and type(args[0]) is dict else dict(*args, **kw)
        if self.cow_writes is not None:
            for k in other:
                self._writing(k)
        dict.update(self, other)
        self.changed.update(other)  # C loops: a restore puts millions of keys back this way

    def popitem(self) -> tuple[Any, Any]:
        key = next(reversed(self.keys()))
        return key, self.pop(key)

    def _touch_all(self) -> None:
        if self.cow is not None:
            for key in list(dict.keys(self)):
                self._handing_out(key)
        self.changed.update(dict.items(self))

    def items(self) -> Any:
        if self.deep:  # the values handed out may be changed in place
            self._touch_all()
        return dict.items(self)

    def values(self) -> Any:
        if self.deep:
            self._touch_all()
        return dict.values(self)

    def clear(self) -> None:
        # A delta cannot say "all gone" cheaply: the owner (HeapKeyedStateBackend) makes the next
        # snapshot a base; the keys are logged too, for a snapshot in flight.
        if self.cow_writes is not None:
            for key in list(dict.keys(self)):
                self._writing(key)
        self.changed.update(dict.fromkeys(dict.keys(self), ABSENT))
        dict.clear(self)
        if self.on_clear is not None:
            self.on_clear()


def _untracked(keys: list[Any], values: list[Any] | None = None) -> None:
    """Nothing to record: the table is not tracked, or logged each write itself."""


def batch_access(
    table: Any, keys: list[Any] | None = None
) -> tuple[Callable[..., Any], Callable[[Any, Any], None], Callable[..., None]]:
    """``(get, put, record)`` for one batch of reads and whole-value writes on the task thread (a
    reduce's loop, with no barrier inside it: a barrier swaps the change log): ``record(keys,
    values)`` after the batch, with every key ``put`` and the values put, in order (``values`` None:
    looked up), even if it ended early. ``keys``: the batch's keys, when the caller knows them beforehand.

    A TrackedTable of whole values is read and written through the dict's own C methods, and the keys
    written go into its change log in one C-level update by ``record``: its Python ``get`` and
    ``__setitem__`` cost a heap count at 3 M keys about a tenth of its throughput. Nothing can attach
    a snapshot's copy-on-write view during the batch, since only the task thread does, at a barrier;
    a view may be detached meanwhile (the writer thread), which asks nothing of the writes. With
    views attached, the batch's ``keys`` are handed to them up front (``CopyOnWrite.preserve_many``:
    for numbers, a look at their types); without ``keys`` (or with a key Python cannot hash), each
    read (and, for a delta of every key, each write) first lets the views save its key's barrier
    value. Any other table (a ``deep`` one, a plain dict, an on-disk table) is used through its own
    methods, and ``record`` does nothing."""
    if type(table) is not TrackedTable or table.deep:
        return table.get, table.__setitem__, _untracked
    lookup, store = dict.get.__get__(table), dict.__setitem__.__get__(table)
    log = table.changed.update

    def record(keys: list[Any], values: list[Any] | None = None) -> None:
        log(zip(keys, map(lookup, keys) if values is None else values))

    views = table.cow
    if views is None:
        return lookup, store, record
    if keys is not None:
        try:
            batch = set(keys)
        except TypeError:  # a key held by its stand-in (state_keys.hashable_key): key by key below
            pass
        else:
            for view in views:
                view.preserve_many(table, batch)
            return lookup, store, record

    # A snapshot in flight: a key's barrier value is saved before it is handed out (a reduce function
    # may change what it is given in place) or replaced, as TrackedTable's own methods do.
    handing_out, writing = table._handing_out, table._writing

    def get(key: Any, default: Any = None) -> Any:
        handing_out(key)
        return lookup(key, default)

    def put(key: Any, value: Any) -> None:
        writing(key)
        store(key, value)

    return get, put, record


def cut(tables: Mapping[str, TrackedTable]) -> dict[str, dict[Any, Any]]:
    """Task thread, at the barrier: each table's change log since the previous cut; new empty logs."""
    out = {}
    for name, t in tables.items():
        out[name], t.changed = t.changed, {}
    return out


def begin_delta(
    tables: Mapping[str, TrackedTable], changed: Iterable[Mapping[str, Any]], key_groups: KeyGroups | None = None
) -> tuple[Callable[[], "Parts"], Callable[[], None]]:
    """Task thread, at the barrier: attach a copy-on-write view of the change logs in ``changed`` (those
    of every snapshot since the last completed one, oldest first) to each table. The returned callable,
    run once on the writer thread, returns the delta's parts [(key group or sequence number, payload)]
    and detaches the views; the second detaches them without reading (a snapshot that will never be
    read). With ``key_groups`` the parts are grouped: every part holds keys of one key group, the one
    it is listed under (``Parts.grouped``); without, numbered in order."""
    lock = threading.Lock()
    logs: dict[str, list[Any]] = {}
    for snapshot in changed:
        for name, log in snapshot.items():
            if (log is EVERYTHING or log) and name in tables:
                logs.setdefault(name, []).append(log)
    views = {name: CopyOnWrite(lock, pending) for name, pending in logs.items()}
    for name, view in views.items():
        _attach(tables[name], view)

    def read() -> Parts:
        parts: list[tuple[int, bytes]] = []
        frames: dict[int, list[bytes]] = {}  # grouped: the pickles of each key group, one part each at the end
        entries = 0
        seq = itertools.count()
        try:
            for name, view in views.items():
                table = tables[name]
                typed: list[tuple[Any, state_columns.Columns]] = []  # (key groups, columns) of slices
                for piece, refs, kgs, cols, absent in _slices(name, table, view, key_groups):
                    if cols is not None and not view.everything:
                        # Numbers from the logs: the barrier's values, and nothing changes a number in
                        # place, so nothing the task does can concern them (no lock, nothing marked).
                        typed.append((kgs, cols))
                        entries += len(cols)
                        continue
                    with lock:  # one slice of keys at a time: the task thread waits at most this long
                        # Keys the task saved go with ``saved`` (their values here may be from after the
                        # barrier); with none among the slice's keys, it is written unfiltered.
                        clean = not view.saved or view.done.isdisjoint(piece)
                        if cols is not None:  # looked up in the table (EVERYTHING) before the lock
                            if not clean:
                                kgs, cols = state_columns.leave_out(kgs, cols, piece, view.done)
                            typed.append((kgs, cols))
                            view.done.update(piece)
                            entries += len(cols)
                            continue
                        if kgs is None:  # ungrouped: one part per slice
                            fresh, part = _refs_part(name, piece, refs, None if clean else view, absent)
                            if part is not None:
                                parts.append((next(seq), part))
                        else:
                            fresh = []
                            (ordered, values), spans = group_by_key_group(kgs, piece, refs)
                            for kg, a, b in spans:
                                run, part = _refs_part(name, ordered[a:b], values[a:b], None if clean else view, absent)
                                if part is not None:
                                    frames.setdefault(kg, []).append(part)
                                fresh.append(run)
                            fresh = piece if clean else list(itertools.chain.from_iterable(fresh))
                        # Only now, with the values pickled: ``preserve`` lets the task hand out a key in
                        # ``done`` without a copy, so a key marked before its value was pickled could
                        # hand the writer a value changed after the barrier.
                        view.done.update(fresh)
                        entries += len(fresh)
                for kg, frame in state_columns.by_key_group(typed):
                    frames.setdefault(kg, []).append(frame)
                del typed
                with lock:  # every pending key is written now: nothing more is saved
                    _detach(table, view)
                    saved = list(view.saved.items())
                if saved:
                    entries += len(saved)
                    if key_groups is None:
                        parts.append((next(seq), _part(name, saved)))
                    else:
                        ordered, runs = group_keys(saved, key_groups([k for k, _ in saved]))
                        for kg, lo, hi in runs:
                            frames.setdefault(kg, []).append(_part(name, ordered[lo:hi]))
        finally:
            for name, view in views.items():
                _detach(tables[name], view)
        # a key group's part is its pickles one after the other (``frames``): one part per key group
        parts.extend((kg, b"".join(frames.pop(kg))) for kg in sorted(frames))
        return Parts(parts, entries, key_groups is not None)

    def discard() -> None:
        for name, view in views.items():
            _detach(tables[name], view)

    return read, discard


def _slices(
    name: str, table: dict[Any, Any], view: CopyOnWrite, key_groups: KeyGroups | None
) -> Iterator[tuple[list[Any], list[Any], Any, "state_columns.Columns | None", bool]]:
    """The changed entries of one table as the writer takes them: slices ``(keys, values, their key
    groups or None (ungrouped), the slice as columns or None, whether a value may be ABSENT)``.

    Grouped: ``GROUP_SLICE`` keys at a time, hashed by key group a block at a time (int keys become an
    int64 array once per block, which the hash and the columns share); where every key and value is a
    number or a tuple of numbers the slice comes as ``state_columns.Columns`` too, copied out here,
    outside the lock, and sorted by key group once per table (``state_columns.by_key_group``); else
    the caller pickles it under the lock, sorted by key group (``group_by_key_group``), a small frame
    per key group run (small slices: sorted by key group over a large slice, every value touched is
    a cache miss). Ungrouped: ``CHUNK`` keys at a time, no columns."""
    size = GROUP_SLICE if key_groups is not None else CHUNK
    of_ints = getattr(key_groups, "of_ints", None)
    for keys, values in _blocks(view.pending, table):
        ints = state_columns.int_array(keys) if key_groups is not None else None
        kgs = None
        if key_groups is not None:
            kgs = of_ints(ints) if ints is not None and of_ints is not None else None
            if kgs is None:
                kgs = key_groups(keys)  # a block at a time: numpy's calls cost per call
        for lo in range(0, len(keys), size):
            piece, refs = keys[lo : lo + size], values[lo : lo + size]
            # an absent value (a deleted key) is no number: columns refuses it, and only then is it looked for
            cols = None if ints is None else state_columns.columns(name, piece, refs, key_array=ints[lo : lo + size])
            absent = cols is None and any(map(operator.is_, refs, itertools.repeat(ABSENT)))
            yield piece, refs, None if kgs is None else kgs[lo : lo + size], cols, absent


def _blocks(pending: tuple[Any, ...], table: dict[Any, Any]) -> Iterator[tuple[list[Any], list[Any]]]:
    """The keys of the change logs ``pending`` (oldest first, never changed any more), each once with
    its newest logged value, as blocks of ``HASH_BLOCK`` ``(keys, values)``. Not the logs merged into
    one, nor ``list`` of them whole: single C calls that hold the interpreter lock for as long as they
    run (54 ms for 1.5 M keys on a slow 2-core machine; a barrier arriving meanwhile waited that long).
    A key of an older log that a newer one holds too is left out of the older one's blocks, in C.
    ``EVERYTHING``: the keys ``table`` holds now, listed in one C call, with their values looked up
    (the task's changes since the barrier are saved values, left out by the writer as ``done``)."""
    if any(log is EVERYTHING for log in pending):
        keys = list(dict.keys(table))
        lookup = dict.get.__get__(table)
        for lo in range(0, len(keys), HASH_BLOCK):
            block = keys[lo : lo + HASH_BLOCK]
            yield block, list(map(lookup, block, itertools.repeat(ABSENT)))
        return
    for i in range(len(pending) - 1, -1, -1):
        log, newer = pending[i], pending[i + 1 :]
        key_it, value_it = iter(log), iter(log.values())  # one order: the log is never changed
        while keys := list(itertools.islice(key_it, HASH_BLOCK)):
            values = list(itertools.islice(value_it, len(keys)))
            for later in newer:
                taken = list(map(later.__contains__, keys))
                if any(taken):
                    keep = list(map(operator.not_, taken))
                    keys, values = list(itertools.compress(keys, keep)), list(itertools.compress(values, keep))
            if keys:
                yield keys, values


def _refs_part(
    name: str, keys: list[Any], values: list[Any], view: CopyOnWrite | None, absent: bool = True
) -> tuple[list[Any], bytes | None]:
    """Under the lock: (the keys not yet ``done``, the pickle of them and their ``values``, ``ABSENT``
    for a deleted key) or None if every key is done. Keys are written once per delta, so only a key
    the task saved can be done already. ``view`` None: the caller knows none is; ``absent`` False: it
    knows every key had a value."""
    if view is not None and view.saved and not view.done.isdisjoint(keys):  # the task saved some meanwhile: they go with ``saved``
        done = view.done
        kept = [(k, v) for k, v in zip(keys, values) if k not in done]
        if not kept:
            return [], None
        keys, values = [k for k, _ in kept], [v for _, v in kept]
    return keys, columns_frame(name, keys, values, absent)


_views_lock = threading.Lock()  # the task thread attaches, writer threads detach


def _attach(table: TrackedTable, view: CopyOnWrite) -> None:
    with _views_lock:
        table.cow = (*(table.cow or ()), view)
        if view.everything:
            table.cow_writes = (*(table.cow_writes or ()), view)


def _detach(table: TrackedTable, view: CopyOnWrite) -> None:
    with _views_lock:
        rest = tuple(v for v in table.cow or () if v is not view)
        table.cow = rest or None
        table.cow_writes = tuple(v for v in rest if v.everything) or None


def _part(name: str, rows: list[tuple[Any, Any]]) -> bytes:
    return columns_frame(name, [k for k, _ in rows], [v for _, v in rows])
