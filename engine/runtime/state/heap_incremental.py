"""Incremental checkpoints of the heap keyed backend: a changelog of keys and copy-on-write deltas.

Millstream's version of FLIP-158 (the changelog state backend) for state held in dicts, designed
around the interpreter lock:

* **What changed.** With incremental checkpoints on, the heap backend hands out ``TrackedTable``
  dicts, which add a key to their table's change set on every write (``t[k] = v``, ``pop``,
  ``setdefault``, ...). Tables whose values are changed in place (list, map and window state: the
  ``MUTABLE_KINDS``) count a read too, since the caller may append to what it read. Value, reducing
  and aggregating state is written back whole (``t[k] = v``), so its reads cost nothing extra. A
  table written by a reduce's batches of immutable values keeps a change log instead
  (``change_log``): the batches' keys and values, copied while they are in cache where they are
  numbers keyed by ints (as marshal's bytes, ``marshalled_batch``, or columns) or string keys
  (as text columns, ``string_columns``), else kept as the batches' objects; the writer reads any of
  them without touching the table.
* **At the barrier** (task thread) the change sets are swapped for empty ones (``ChangeTracker.plan``
  and ``cut``): O(tables), whatever the state's size.
* **Off the task thread** the writer thread reads the changed keys' values in chunks and pickles each
  chunk as one part of a shared file. A value must be the one it had at the barrier: until the
  writer has taken a key, the task thread saves the key's old value before it changes it
  (``CopyOnWrite.preserve``: the old object for a write, a deep copy before handing out a mutable
  value). The writer holds the snapshot's lock, and so the interpreter lock, for one chunk at a time,
  so the task thread waits at most one chunk's pickling.
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

import itertools
import operator
import pickle
import threading
from typing import Any, Callable, Iterable, Iterator, Mapping

from millstream.engine.runtime.key_group_batch import group_by_key_group, group_keys, take
from millstream.engine.runtime.state import change_log, marshalled_batch, state_columns, string_arrays, string_columns
from millstream.engine.runtime.state.change_log import ChangeLog
from millstream.engine.runtime.state.heap_state_files import ABSENT, KeyGroups, Parts, columns_frame
from millstream.engine.runtime.state.immutability import flat_immutable, immutable

try:
    import numpy as np
except ImportError:  # a bare Python on a Spark executor: no log of text columns is ever kept
    np = None

# Kinds of state whose values callers change in place after reading them (``HeapListState.add``
# appends to the list ``setdefault`` returned; the window operator mutates its per-key dicts).
MUTABLE_KINDS = frozenset({"list", "map", "window", "ttl-list", "ttl-map"})
CHUNK = 2_000  # keys per part: what the writer thread pickles while it holds the interpreter lock
GROUP_SLICE = 8_192  # changed keys a delta's writer sorts by key group and pickles at a time (``_lock_batches``)
HASH_BLOCK = 8 * GROUP_SLICE  # changed keys the writer takes from the change sets and hashes at a time
# A log of objects whose records hit at least this share of distinct keys (``TrackedTable.distinct``)
# is written as logged, without a dict of the newest values (``_logged_objects``); after
# ``MEASURE_EVERY`` such logs the next is read through the dict, which measures the share again.
ALL_DISTINCT = 0.98
MEASURE_EVERY = 4


class _Everything:
    """The change set of a delta of every key (``EVERYTHING``): taken where a base is due but cannot be
    forked. Every key is pending: the task saves the barrier value of any key it touches before the
    writer has read it (a key added since saves "absent", written as a deletion, harmless on a chain
    that starts here), and the writer reads the keys the table holds when it starts."""

    def __contains__(self, key: Any) -> bool:
        return True

    def __repr__(self) -> str:
        return "EVERYTHING"


EVERYTHING: Any = _Everything()


class CopyOnWrite:
    """The values of one table's changed keys as of the barrier, for the writer thread to read while
    the task thread goes on changing the table."""

    __slots__ = ("lock", "pending", "done", "saved")

    def __init__(self, lock: threading.Lock, pending: Iterable[set[Any]]) -> None:
        self.lock = lock
        self.pending = tuple(pending)  # never changed: the tracker has swapped in new sets
        self.done: set[Any] = set()  # keys the writer has read or the task has saved
        self.saved: dict[Any, Any] = {}  # key -> value at the barrier (ABSENT: it had none)

    def preserve(self, table: dict[Any, Any], key: Any) -> None:
        """On the task thread, before ``key`` of ``table`` changes (or is handed out to be changed)."""
        if key in self.done:
            return
        for pending in self.pending:  # a loop, not any() over a generator: this runs on every write
            if key in pending:
                break
        else:
            return
        with self.lock:
            if key in self.done:
                return
            self.done.add(key)
            value = dict.get(table, key, ABSENT)
            if value is not ABSENT and not immutable(value):  # it may be changed in place from now on
                value = _deep_copy(value)
            self.saved[key] = value

    def preserve_many(self, table: dict[Any, Any], keys: set[Any]) -> None:
        """``preserve`` for each of ``keys`` (a batch about to be read and written), in set operations:
        a few C loops over the batch instead of a Python call per access."""
        fresh = keys - self.done
        if not fresh:
            return
        if any(pending is EVERYTHING for pending in self.pending):
            need = fresh
        elif len(self.pending) == 1:
            need = fresh & self.pending[0]
        else:
            need = set().union(*(fresh & pending for pending in self.pending))
        if not need:
            return
        with self.lock:
            need -= self.done
            if not need:
                return
            self.done |= need
            values = list(map(dict.get.__get__(table), need, itertools.repeat(ABSENT)))
            self.saved.update(zip(need, _detached(values)))


def _detached(values: list[Any]) -> list[Any]:
    """``values`` with each one that may be changed in place replaced by a deep copy (``ABSENT`` kept).
    The type checks run as C loops over the batch: scalars, and tuples of scalars, need no copy."""
    if flat_immutable(values, also=(object,)):  # ABSENT (a bare object() holds nothing that can change)
        return values
    return [v if v is ABSENT or immutable(v) else _deep_copy(v) for v in values]


def _deep_copy(value: Any) -> Any:
    # through pickle: what a checkpoint writes must survive it anyway, and it is the fastest deep copy
    return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))


class TrackedTable(dict):
    """A state table that records the keys written (and, for ``deep`` tables, read) since the last cut."""

    __slots__ = ("name", "changed", "cow", "deep", "on_clear", "log", "logs", "records", "distinct", "unmeasured")

    def __init__(self, name: str, deep: bool, on_clear: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.name = name
        self.deep = deep  # values are changed in place: reads count as changes
        self.changed: set[Any] = set()
        # The views of the snapshots in flight (several, when checkpoints overlap); None when none is.
        self.cow: tuple[CopyOnWrite, ...] | None = None
        self.on_clear = on_clear
        # This interval's change log (``change_log``), or None: the change set records the changes.
        self.log: ChangeLog | None = None
        self.logs: bool | None = None  # None: no batch of values written yet; False: never log
        self.records = 0  # records written through batches into the change set this interval
        self.distinct = 1.0  # distinct keys per record changed, as last measured
        self.unmeasured = 0  # logs of objects written since ``distinct`` was last measured (writer thread)

    def _unlog(self) -> None:
        """Before any write that is not a logged batch: the log's keys go into the change set and the
        rest of the interval is recorded there, so that a key's newest change is in one place."""
        log, self.log = self.log, None
        if log is not None and log.entries:
            self.changed.update(log.keys())
            self.records += log.entries  # the interval's records, for the next cut's measure

    def recorder(self) -> Callable[..., None]:
        """``record(keys, values=None)`` for one batch (``batch_access``): into the log where one is
        kept and the batch's values are given and cannot change in place, else into the change set."""
        log = self.log
        if log is None:
            changed = self.changed

            def record_set(keys: list[Any], values: list[Any] | None = None) -> None:
                if values is not None and self.logs is None:
                    self.logs = True  # batches of values: the next cut may start a log
                changed.update(keys)
                self.records += len(keys)

            return record_set

        def record_log(keys: list[Any], values: list[Any] | None = None) -> None:
            if not keys:  # a batch whose function failed at its first record: nothing written
                return
            if self.log is log and values is not None:
                # More records than MIN_DISTINCT allows for the table's keys: repeats, cheaper in the
                # set. Not at one record a key: a task that writes every key about one and a half
                # times an interval (3 M keys at 2 M records/s) then fell back to the set midway
                # through every other interval, each costing the writer 1.7x a logged one and the
                # task its copy-on-write saves (docs/large-state.md, change 28).
                if log.entries + len(keys) > len(self) / change_log.MIN_DISTINCT + change_log.MIN_KEYS:
                    self.distinct = 0.0
                else:
                    # numbers keyed by ints as marshal's bytes, else as columns (None without numpy
                    # too); once the log holds objects it takes no more of either: the writer would
                    # read them back as objects
                    if not log.refs and not log.text:
                        batch = marshalled_batch.dump(self.name, keys, values)
                        if batch is not None:
                            log.add_marshalled(batch)
                            return
                        columns = state_columns.columns(self.name, keys, values)
                        if columns is not None:
                            log.add(columns)
                            return
                    if not log.refs and (log.text or not log.batches):
                        # string keys as text columns: encoded here, where the batch is in cache (the
                        # writer would meet every object cold), and the log keeps bytes, not objects
                        text = string_columns.batch(self.name, keys, values)
                        if text is not None:
                            log.add_text(text)
                            return
                    if flat_immutable(values):
                        log.add_refs(list(keys), list(values))  # the caller's lists may change later
                        return
                    self.logs = False  # values that may change in place: tracked by the set for good
            self._unlog()
            self.changed.update(keys)
            self.records += len(keys)

        return record_log

    def __reduce__(self) -> Any:
        # A snapshot or savepoint holds a plain dict: backend-neutral, and without the change set.
        return dict, (), None, None, iter(dict.items(self))

    def _touch(self, key: Any) -> None:
        if self.log is not None:
            self._unlog()
        self.changed.add(key)
        if self.cow is not None:
            self._preserve(key)

    def _preserve(self, key: Any) -> None:
        for view in self.cow or ():
            view.preserve(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        if self.log is not None:
            self._unlog()
        self.changed.add(key)
        if self.cow is not None:
            self._preserve(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        self._touch(key)
        dict.__delitem__(self, key)

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            self._touch(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._touch(key)
        return dict.setdefault(self, key, default)

    # A read hands out the value object: one that is changed in place must be saved first (``preserve``
    # copies only values that are not immutable), and for ``deep`` tables the read counts as a change.
    def get(self, key: Any, default: Any = None) -> Any:
        if self.deep:
            if key in self:
                self._touch(key)
        elif self.cow is not None:
            self._preserve(key)
        return dict.get(self, key, default)

    def __getitem__(self, key: Any) -> Any:
        if self.deep:
            if key in self:
                self._touch(key)
        elif self.cow is not None:
            self._preserve(key)
        return dict.__getitem__(self, key)

    def update(self, *args: Any, **kw: Any) -> None:
        other = args[0] if len(args) == 1 and not kw and type(args[0]) is dict else dict(*args, **kw)
        if self.cow is not None:
            for k in other:
                self._preserve(k)
        if self.log is not None:
            self._unlog()
        self.changed.update(other)  # C loops: a restore puts millions of keys back this way
        dict.update(self, other)

    def popitem(self) -> tuple[Any, Any]:
        key = next(reversed(self.keys()))
        return key, self.pop(key)

    def _touch_all(self) -> None:
        for key in list(dict.keys(self)):
            self._touch(key)

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
        # snapshot a base; the keys are recorded too, for a snapshot in flight.
        for key in list(dict.keys(self)):
            self._touch(key)
        dict.clear(self)
        if self.on_clear is not None:
            self.on_clear()


def _untracked(keys: list[Any], values: list[Any] | None = None) -> None:
    """Nothing to record: the table is not tracked, or recorded each write itself."""


def batch_access(
    table: Any, keys: list[Any] | None = None
) -> tuple[Callable[..., Any], Callable[[Any, Any], None], Callable[..., None]]:
    """``(get, put, record)`` for one batch of reads and whole-value writes on the task thread (a
    reduce's loop, with no barrier inside it: a barrier swaps the change set): ``record(keys,
    values)`` after the batch, with every key ``put`` and the value last put for it, in order, even
    if it ended early (``values`` may be left out, and then the keys go into the change set).
    ``keys``: the batch's keys, when the caller knows them beforehand.

    A TrackedTable of whole values with no snapshot in flight is read and written through the dict's
    own C methods, and the keys written go into its change set in one C-level update by ``record``:
    its Python ``get`` and ``__setitem__`` cost a heap count at 3 M keys about a tenth of its
    throughput. Nothing can attach a snapshot's copy-on-write view during the batch, since only the
    task thread does, at a barrier; a view may be detached meanwhile (the writer thread), which asks
    nothing of the writes. With views attached, the barrier values of the batch's ``keys`` are saved
    up front (``CopyOnWrite.preserve_many``) and the batch goes through the C methods too; without
    ``keys`` (or with a key Python cannot hash), each read and write first lets the views save its
    key's barrier value. The keys are recorded by ``record`` either way, in the table's change log
    where it keeps one (``change_log``: the batch's values copied while they are in
    cache), else in its change set. Any other table (a ``deep`` one, a plain dict, an on-disk table)
    is used through its own methods, and ``record`` does nothing."""
    if type(table) is not TrackedTable or table.deep:
        prepare = getattr(table, "prepare_keys", None)  # an on-disk table encodes the batch's keys at once
        if prepare is not None and keys is not None:
            prepare(keys)
        return table.get, table.__setitem__, _untracked
    lookup, store = dict.get.__get__(table), dict.__setitem__.__get__(table)
    views = table.cow
    if views is None:
        return lookup, store, table.recorder()
    if keys is not None:
        try:
            batch = set(keys)
        except TypeError:  # a key held by its stand-in (state_keys.hashable_key): key by key below
            pass
        else:
            for view in views:
                view.preserve_many(table, batch)
            return lookup, store, table.recorder()

    # A snapshot in flight: a key's barrier value is saved before it is handed out (a reduce function
    # may change what it is given in place) or replaced, as TrackedTable's own methods do.
    preserve = table._preserve

    def get(key: Any, default: Any = None) -> Any:
        preserve(key)
        return lookup(key, default)

    def put(key: Any, value: Any) -> None:
        preserve(key)
        store(key, value)

    return get, put, table.recorder()


def cut(tables: Mapping[str, TrackedTable]) -> dict[str, set[Any] | ChangeLog]:
    """Task thread, at the barrier: each table's changes since the previous cut (its change log where
    it kept one and logged anything, else its change set: never both, ``TrackedTable._unlog``); new
    empty ones, and whether the next interval keeps a log (``change_log``)."""
    out: dict[str, set[Any] | ChangeLog] = {}
    for name, t in tables.items():
        log = t.log
        if log is not None and log.entries:
            out[name] = log
        else:
            out[name] = t.changed
            if t.records:
                t.distinct = len(t.changed) / t.records
        t.changed, t.records = set(), 0
        keeps = t.logs and t.distinct >= change_log.MIN_DISTINCT and len(t) >= change_log.MIN_KEYS
        t.log = ChangeLog() if keeps else None
    return out


def begin_delta(
    tables: Mapping[str, TrackedTable], changed: Iterable[Mapping[str, set[Any]]], key_groups: KeyGroups | None = None
) -> tuple[Callable[[], "Parts"], Callable[[], None]]:
    """Task thread, at the barrier: attach a copy-on-write view of the keys in ``changed`` (the change
    sets of every snapshot since the last completed one) to each table. The returned callable, run
    once on the writer thread, returns the delta's parts [(key group or sequence number, payload)]
    and detaches the views; the second detaches them without reading (a snapshot that will never be
    read). With ``key_groups`` the parts are grouped: every part holds keys of one key group, the one
    it is listed under (``Parts.grouped``); without, numbered in order as before."""
    lock = threading.Lock()
    sets: dict[str, list[set[Any]]] = {}
    logs: dict[str, list[ChangeLog]] = {}  # read without the lock or a view: a log is never changed
    for snapshot in changed:
        for name, keys in snapshot.items():
            if keys and name in tables:
                if type(keys) is ChangeLog:
                    logs.setdefault(name, []).append(keys)
                else:
                    sets.setdefault(name, []).append(keys)
    views = {name: CopyOnWrite(lock, pending) for name, pending in sets.items()}
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
                for batch, piece, absent, cols in _lock_batches(name, table, view.pending, key_groups, seq):
                    with lock:  # one slice of keys at a time: the task thread waits at most this long
                        # Only the task's saves (under this lock) mark keys done before the writer does:
                        # with none among the slice's keys, its runs are pickled unfiltered and marked
                        # done in one update at the end.
                        clean = piece is not None and (not view.saved or view.done.isdisjoint(piece))
                        if cols is not None:
                            # Numbers, copied out before the lock as columns. A key the task saved
                            # meanwhile goes with ``saved`` (its value looked up may be from after the
                            # barrier), so it is left out; every other value looked up was the barrier's.
                            if not clean:
                                cols = state_columns.leave_out(*cols, piece, view.done)
                            typed.append(cols)
                            view.done.update(piece)
                            entries += len(cols[1])
                            continue
                        batch = batch()
                        for kg, keys, refs in batch:
                            if refs is None:
                                # Set operations, each one loop in C over the chunk (``fresh - done`` walks the
                                # chunk, not the done set; ``keys() & fresh`` looks the chunk up in the table).
                                fresh = set(keys) - view.done
                                if fresh:
                                    parts.append((kg, _chunk_part(name, table, fresh)))
                            else:
                                fresh, part = _refs_part(name, keys, refs, None if clean else view, absent)
                                if part is not None:
                                    frames.setdefault(kg, []).append(part)
                            if not clean:
                                # Only now, with the values pickled: ``preserve`` lets the task change a key in
                                # ``done`` without taking the lock, so a key marked before its value was read
                                # could hand the writer a value from after the barrier (a checkpoint counting
                                # a record twice once restored).
                                view.done.update(fresh)
                                entries += len(fresh)
                        if clean:
                            view.done.update(piece)
                            entries += len(piece)
                for kg, frame in state_columns.by_key_group(typed):
                    frames.setdefault(kg, []).append(frame)
                del typed
                with lock:  # every pending key is done now: nothing more is saved
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
            # The logs last: they need no view, and the views above are detached sooner.
            for name, table_logs in logs.items():
                pending = sets.get(name, ())
                if any(keys is EVERYTHING for keys in pending):
                    continue  # every key was read from the table above
                table = tables[name]
                if any(log.refs or log.text for log in table_logs):
                    entries += _logged_objects(name, table, table_logs, pending, key_groups, seq, parts, frames)
                    continue
                for cols in _logged(table, table_logs, pending):
                    entries += len(cols.keys)
                    if key_groups is None:
                        parts.extend((next(seq), frame) for frame in state_columns.encode_chunks(cols, CHUNK))
                    else:
                        kgs = _key_groups_of_ints(key_groups, cols.keys)
                        for kg, frame in state_columns.by_key_group([(kgs, cols)]):
                            frames.setdefault(kg, []).append(frame)
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


def _logged(table: TrackedTable, logs: list[ChangeLog], pending: tuple[set[Any], ...] | list[set[Any]]) -> list[state_columns.Columns]:
    """The newest entry of each key of ``logs`` (a table's, oldest first), one ``Columns`` per value
    spec, less the keys in ``pending``: the change sets of the same delta's other snapshots, whose
    keys the writer reads from the table (with the copy-on-write view), which holds their values at
    the barrier whichever snapshot changed them last. On the writer thread, in numpy."""
    keys, out = change_log.newest(logs)
    entries = sum(log.entries for log in logs)
    if len(logs) == 1:  # this interval's own: how many records hit a key again, for the next cut
        table.distinct = len(keys) / entries
    if pending:
        out = [change_log.without(c, pending) for c in out]
    return [c for c in out if len(c.keys)]


def _logged_objects(
    name: str,
    table: TrackedTable,
    logs: list[ChangeLog],
    pending: tuple[set[Any], ...] | list[set[Any]],
    key_groups: KeyGroups | None,
    seq: Iterator[int],
    parts: list[tuple[int, bytes]],
    frames: dict[int, list[bytes]],
) -> int:
    """``_logged`` for logs holding objects: the newest value of each key (less the keys in
    ``pending``) pickled into ``parts`` (ungrouped, ``CHUNK`` keys a part) or into ``frames`` (grouped:
    a ``GROUP_SLICE`` of keys at a time sorted by key group, a frame per run, as ``_lock_batches``
    gives the change sets' keys). Returns the entries written.

    Where the table's records hit distinct keys, as last measured (``ALL_DISTINCT``), the entries go
    as logged, with no dict of each key's newest value: its inserts were a memory miss a key, 9 % of a
    slot's time at 3 M string keys (issue 16, change 26). Were a key logged twice after all, its
    entries go in the order written (a key group's frames keep the log's order) and every reader
    applies a part's entries in order (``heap_state_files``), so the later one wins as in the dict;
    the delta is only that entry larger. After ``MEASURE_EVERY`` such logs the next is read through
    the dict again, to measure."""
    if key_groups is not None and not any(log.refs for log in logs):
        written = _logged_text(table, logs, pending, key_groups, frames)
        if written is not None:
            return written
    if len(logs) == 1 and table.distinct >= ALL_DISTINCT and table.unmeasured < MEASURE_EVERY:
        table.unmeasured += 1
        slices = change_log.slices(logs, GROUP_SLICE)
    else:
        table.unmeasured = 0
        newest = change_log.newest_objects(logs)
        if len(logs) == 1:
            table.distinct = len(newest) / logs[0].entries
        slices = _slices_of(newest)
    entries = 0
    texts: list[tuple[Any, string_columns.TextColumns]] = []  # string keys' slices, as text columns

    def flush_texts() -> None:
        for kg, frame in string_columns.by_key_group(texts):
            frames.setdefault(kg, []).append(frame)
        texts.clear()

    for keys, values in slices:
        keys, values = _without_pending(keys, values, pending)
        entries += len(keys)
        if key_groups is None:
            for lo in range(0, len(keys), CHUNK):
                parts.append((next(seq), columns_frame(name, keys[lo : lo + CHUNK], values[lo : lo + CHUNK], absent=False)))
        elif keys:
            text = string_columns.batch(name, keys, values)
            if text is not None:
                columns = string_columns.held(text)
                texts.append((_text_key_groups(key_groups, columns.keys, string_columns.ascii_keys(text), keys), columns))
                continue
            if texts:  # a key group's frames keep the log's order
                flush_texts()
            (keys, values), runs = group_by_key_group(key_groups(keys), keys, values)
            for kg, lo, hi in runs:
                frames.setdefault(kg, []).append(columns_frame(name, keys[lo:hi], values[lo:hi], absent=False))
    flush_texts()
    return entries


def _logged_text(
    table: TrackedTable, logs: list[ChangeLog], pending: tuple[set[Any], ...] | list[set[Any]], key_groups: KeyGroups, frames: dict[int, list[bytes]]
) -> int | None:
    """``_logged_objects`` for logs of text columns only (string keys, ``string_columns.batch``), in
    numpy with no Python object per entry: the batches concatenated, each key's newest entry kept by
    a hash of its bytes (``string_arrays.newest``; written as logged where the keys were distinct,
    as there), hashed to key groups from their bytes, and one frame per key group. Returns the
    entries written, or None (nothing written) where the objects path must take the logs: batches
    of several value specs, or two keys whose hashes collide."""
    batches = [b for log in logs for b in log.batches]
    if not batches or any(type(b) is not tuple for b in batches) or len({b[4] for b in batches}) != 1:
        return None
    whole = string_columns.held_batches(batches)
    if len(logs) == 1 and table.distinct >= ALL_DISTINCT and table.unmeasured < MEASURE_EVERY:
        table.unmeasured += 1
    else:
        newest = string_arrays.newest(whole.keys)
        if newest is None:
            return None
        if len(logs) == 1:
            table.unmeasured = 0
            table.distinct = len(newest) / len(whole.keys)
        # not gathered here: ``by_key_group`` gathers each key group's entries from the buffers
        whole = string_columns.pick(whole, newest)
    objects: list[Any] | None = None
    if pending:
        objects = whole.objects()[1]
        keep = [i for i, k in enumerate(objects) if not any(k in changed for changed in pending)]
        if len(keep) != len(objects):
            whole = string_columns.take(whole, np.asarray(keep, dtype=np.int64))
            objects = take(objects, keep)
    if not len(whole.keys):
        return 0
    ascii_keys = all(map(string_columns.ascii_keys, batches))
    kgs = _text_key_groups(key_groups, whole.keys, ascii_keys, objects)
    for kg, frame in string_columns.by_key_group([(kgs, whole)]):
        frames.setdefault(kg, []).append(frame)
    return len(whole.keys)


def _text_key_groups(key_groups: KeyGroups, keys: Any, ascii_keys: bool, objects: list[Any] | None) -> Any:
    """The key groups of string keys held as bytes (``string_arrays.Strings``): from the bytes, a
    slice at a time, where the key type's hash has a batch form for them (``KeyGrouper.of_text``:
    ``STRING`` keys that are ASCII, and strings with no key type); else from the keys as objects
    (``objects``, or decoded)."""
    of_text = getattr(key_groups, "of_text", None)
    out = []
    for lo in range(0, len(keys) if of_text is not None else 0, HASH_BLOCK):
        s = keys.slice(lo, lo + HASH_BLOCK)
        a, b = int(s.starts[0]), int(s.starts[-1] + s.lengths[-1])
        got = of_text(keys.data[a:b], s.starts - a, s.lengths, ascii_keys)
        if got is None:
            break
        out.append(got)
    else:
        if out:
            return np.concatenate(out)
    if objects is None:
        objects = keys.joined().decode("utf-8", "surrogatepass").split("\0")
    return key_groups(objects)


def _slices_of(newest: dict[Any, Any]) -> Iterator[tuple[list[Any], list[Any]]]:
    """A dict's keys and values side by side, a ``GROUP_SLICE`` at a time: no (key, value) pair built."""
    all_keys, all_values = iter(newest), iter(newest.values())
    while keys := list(itertools.islice(all_keys, GROUP_SLICE)):
        yield keys, list(itertools.islice(all_values, len(keys)))


def _without_pending(keys: list[Any], values: list[Any], pending: tuple[set[Any], ...] | list[set[Any]]) -> tuple[list[Any], list[Any]]:
    """``keys`` and their ``values`` less the keys in ``pending`` (the change sets of the same delta's
    other snapshots, whose keys the writer reads from the table with the copy-on-write view)."""
    if not pending:
        return keys, values
    kept = [i for i, k in enumerate(keys) if not any(k in changed for changed in pending)]
    if len(kept) == len(keys):
        return keys, values
    return take(keys, kept), take(values, kept)


def _key_groups_of_ints(key_groups: KeyGroups, keys: Any) -> Any:
    of_ints = getattr(key_groups, "of_ints", None)
    kgs = of_ints(keys) if of_ints is not None else None
    return kgs if kgs is not None else key_groups(keys.tolist())


def _lock_batches(
    name: str, table: dict[Any, Any], pending: tuple[set[Any], ...], key_groups: KeyGroups | None, seq: Iterable[int]
) -> Iterable[tuple[Callable[[], list[tuple[int, list[Any], list[Any] | None]]], list[Any] | None, bool, Any]]:
    """The changed keys of one table as the writer takes them: batches (one hold of the lock each)
    of [(key group or sequence number, keys, their values or None)] (a callable that makes the list),
    each with (grouped) the slice's keys, whether any of them had no value in the table (``ABSENT``)
    and, where every key and value is a number or a tuple of numbers, (the keys' key groups, the
    slice as ``state_columns.Columns``); else None, True and None.

    Ungrouped: ``CHUNK`` keys in the set's order, one part each. Grouped: a ``GROUP_SLICE`` of keys
    in the set's order, sorted by key group (hashed beforehand, outside the lock: keys never change,
    and ``pending`` is not changed once cut), one run per key group present; the writer pickles each
    run as a small pickle (a frame) and a key group's frames of the whole delta make its part, so a
    file has one part per key group. Small slices, because the keys of a run are spread over the
    slice: sorted by key group over a large slice, every key touched is a cache miss (the writer
    was three to four times slower at 64 Ki keys a slice than in the set's order; 1.5 M changed int
    keys took 0.51 s at 4 Ki, 0.48 s at 8 Ki and 0.49 s at 16 Ki keys a slice). The values are
    looked up before the slice is sorted, in the set's order and without the lock: a value looked up
    early is still the barrier's when the writer pickles it under the lock unless its key is ``done``
    by then (the task saves the value, marking its key done, before it writes or hands it out), and
    such keys are left out (``_refs_part``). Numbers are copied into columns here, outside the lock,
    and sorted by key group once per table (``state_columns.by_key_group``)."""
    seq = iter(seq)
    if key_groups is None:
        keys = _distinct(pending, table)
        while True:
            taken = list(itertools.islice(keys, CHUNK))
            if not taken:
                return
            yield (lambda taken=taken, n=next(seq): [(n, taken, None)]), None, True, None
    keys = _distinct(pending, table)
    lookup = dict.get.__get__(table)  # the dict's own get: not a read the change tracking counts
    of_ints = getattr(key_groups, "of_ints", None)
    while block := list(itertools.islice(keys, HASH_BLOCK)):
        # int keys as an array once: the key groups' hash and the typed columns both take it
        ints = state_columns.int_array(block)
        kgs = of_ints(ints) if ints is not None and of_ints is not None else None
        if kgs is None:
            kgs = key_groups(block)  # a few slices at a time: numpy's calls cost per call
        for lo in range(0, len(block), GROUP_SLICE):
            piece = block[lo : lo + GROUP_SLICE]
            refs = list(map(lookup, piece, itertools.repeat(ABSENT)))
            # an absent value (a deleted key) is no number: columns refuses it, and only then is it looked for
            cols = None if ints is None else state_columns.columns(name, piece, refs, key_array=ints[lo : lo + GROUP_SLICE])
            absent = cols is None and any(map(operator.is_, refs, itertools.repeat(ABSENT)))
            kg_slice = kgs[lo : lo + GROUP_SLICE]
            yield _runs_of(kg_slice, piece, refs), piece, absent, None if cols is None else (kg_slice, cols)


def _runs_of(kgs: Any, piece: list[Any], refs: list[Any]) -> Callable[[], list[tuple[int, list[Any], list[Any] | None]]]:
    def runs() -> list[tuple[int, list[Any], list[Any] | None]]:
        (ordered, values), spans = group_by_key_group(kgs, piece, refs)
        return [(kg, ordered[a:b], values[a:b]) for kg, a, b in spans]

    return runs


def _distinct(pending: tuple[set[Any], ...], table: dict[Any, Any] | None = None) -> Iterator[Any]:
    """The keys of ``pending`` (change sets nobody changes any more), each once, as an iterator the
    writer takes a block at a time. Not ``list(set)`` of them all: a single C call that holds the
    interpreter lock for as long as it runs (54 ms for 1.5 M keys on a slow 2-core machine, and a
    barrier arriving meanwhile waited that long). Overlapping checkpoints' sets may share keys: a
    later set's keys are filtered against the earlier ones, in C. ``EVERYTHING``: the keys ``table``
    holds now, listed in one C call (the task's changes since the barrier are saved values, left out
    by the writer as ``done``)."""
    if any(keys is EVERYTHING for keys in pending):
        return iter(list(dict.keys(table or {})))
    streams: list[Iterator[Any]] = []
    for i, keys in enumerate(pending):
        stream: Iterator[Any] = iter(keys)
        for earlier in pending[:i]:
            stream = itertools.filterfalse(earlier.__contains__, stream)
        streams.append(stream)
    return itertools.chain.from_iterable(streams)


def _refs_part(
    name: str, keys: list[Any], values: list[Any], view: CopyOnWrite | None, absent: bool = True
) -> tuple[list[Any], bytes | None]:
    """Under the lock: (the keys not yet ``done``, the pickle of them and their ``values`` looked up
    earlier, ``ABSENT`` for a key the table did not hold) or None if every key is done. Keys are
    written once per delta, so only a key the task saved can be done already. ``view`` None: the
    caller knows none is; ``absent`` False: it knows every key had a value."""
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


def _detach(table: TrackedTable, view: CopyOnWrite) -> None:
    with _views_lock:
        rest = tuple(v for v in table.cow or () if v is not view)
        table.cow = rest or None


def _part(name: str, rows: list[tuple[Any, Any]]) -> bytes:
    return columns_frame(name, [k for k, _ in rows], [v for _, v in rows])


def _chunk_part(name: str, table: dict[Any, Any], keys: set[Any]) -> bytes:
    """The part holding ``keys`` of ``table`` as they are now (a key not in it: deleted). Values go
    as a dict, which pickles about a third faster and unpickles twice as fast as (key, value) pairs.
    ``dict.__getitem__`` bound to the table: the writer's reads are not changes."""
    present = dict.keys(table) & keys
    live = dict(zip(present, map(dict.__getitem__.__get__(table), present)))
    gone = list(keys - present) if len(present) != len(keys) else []
    return pickle.dumps((name, live, gone), pickle.HIGHEST_PROTOCOL)
