"""The on-disk keyed state backend: state larger than memory, kept in LMDB behind a write-back cache.

It plays the part of Flink's EmbeddedRocksDBStateBackend. Each state name is
one LMDB named database of key group + encoded key -> pickled value. Operators and the
heap backend's state classes use a table as a plain dict and change nested
values in place (``table.get(k).append(x)``), so recently used entries are
held in an LRU cache as live Python objects, and only written to LMDB when
they fall out of the cache or on ``flush()``.

Two rules keep in-place changes from being lost:

* Every cached entry that may hold a mutable value is treated as dirty and
  written back whole when it leaves the cache. Only entries read from disk
  whose value is immutable (numbers, strings, tuples of them, ...) skip that.
* The entries of the backend's ``current_key`` are never evicted. The window
  operator holds ``windows = contents.get(key)`` while its trigger touches
  other tables; evicting ``windows`` then would detach the object it keeps
  changing. Any other caller that holds a value object across accesses to
  other keys must store it again (``table[k] = obj``), as with Flink's RocksDB.

Keys are stored so that equal keys share one entry, as in a dict: an int of 64
bits in numeric order and a str as its UTF-8 (``state_records``), a bytes or wider
int key as its pickle, and any other key as its canonical form from ``key_encoding`` (``True``,
``1.0`` and ``Decimal(1)`` become the key of ``1``; tuples, namedtuples and ``Row``, frozensets, dataclasses, enums and
datetimes their packed canonical form), whose records carry the original key;
the key first written is kept, as a dict does. A key that ``key_by`` would
refuse (no stable encoding) is refused here too.

Keys are prefixed by their key group (``state_records``). A checkpoint that
reads the whole state (a full one, a base) takes a read transaction at the
barrier and, off the task thread, copies it with LMDB's own compacting copy and
reads the copy (``begin_snapshot``, ``_open_snapshot``). The directory is a working copy, not a durable store:
restores come from snapshots. Opening discards what it held, and ``close()``
deletes the LMDB files. One directory serves one backend at a time, and a
backend is used by one thread.
"""
from __future__ import annotations

import hashlib
import itertools
import logging
import operator
import os
import pickle
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import ItemsView, MutableMapping, ValuesView
from typing import Any, Callable, Iterator, Mapping

import lmdb
import msgpack

try:
    import numpy as np
except ImportError:  # a bare Python on a Spark executor, which never writes a checkpoint (key_group_batch)
    np = None

from millstream.engine.runtime.key_encoding import EXT_BIGINT, canonical
from millstream.engine.runtime.key_group_batch import assign_to_key_groups, key_group_order, take as _take
from millstream.engine.runtime.key_groups import assign_to_key_group
from millstream.engine.runtime.state.heap_backend import StateFactory, StateTypeMismatch
from millstream.engine.runtime.state.immutability import immutable
from millstream.engine.runtime.state.record_stream import by_key_group
from millstream.engine.runtime.state.rolled_compaction import RolledCompaction
from millstream.engine.runtime.state.state_chain import ChangeTracker, SnapshotPlan
from millstream.engine.runtime.state.state_records import (
    KG_BYTES,
    RECORD_KEYS_VERSION,
    STR_PICKLE_SLACK,
    WRAPPED as _WRAPPED,
    decode_key,
    decode_record as _decode,
    digest_source,
    encode_key,
    key_group_prefix,
    upgrade_keys,
)

MAX_STATES = 128  # LMDB named databases; each costs a little in every transaction
#: Deltas an incremental chain of this backend holds before its next checkpoint is a base. A base reads
#: every record through a read transaction and writes all the state: under a stream of new keys it was
#: most of the writer's work at 3 M keys (a tenth of the slot's interpreter time at 10 deltas). The
#: chain's entries are counted, so a restore never replays more than twice the live entries whatever
#: this says (``ChangeTracker._due_for_base``); the bound is on files per chain (a restore opens each).
MAX_DELTAS = 32
_log = logging.getLogger(__name__)
_LMDB_FILES = ("data.mdb", "lock.mdb")
_SNAPSHOT_COPIES = "snapshots"  # in the directory: the copies snapshots are read from (``_open_snapshot``)
_TOMB = object()  # a cached entry that knows its key has no value
_UNLOGGED = object()
_HASHED = b"#"  # LMDB key of a pickled key longer than LMDB allows: a digest of it
_PACKED = b"~"  # LMDB key of a key stored as its packed canonical form (pickles start with 0x80)
# Changed records a delta's writer reorders by key group at a time (``_changed_groups``): each C call
# holds the interpreter lock for one block, a few ms at most, while the task thread may wait for it.
_GROUP_BLOCK = 65_536
_PREPARED_TYPES = {str, int}  # keys ``prepare_keys`` encodes ahead (``state_records.encode_key``)


class _Entry:
    # ``logged``: the value object whose record the change tracker recorded last (a barrier took it
    # without writing it back, or a write-back); writing that same immutable value back again, or
    # finding it at a barrier, is not a change.
    __slots__ = ("table", "lk", "key", "value", "dirty", "wrapped", "logged")

    def __init__(self, table: "LmdbTable", lk: bytes, key: Any, value: Any, dirty: bool, wrapped: bool) -> None:
        self.table, self.lk, self.key, self.value, self.dirty, self.wrapped = table, lk, key, value, dirty, wrapped
        self.logged: Any = _UNLOGGED


class LmdbKeyedStateBackend(StateFactory):
    snapshot_in_fork = False  # an LMDB environment must not be used in a forked child

    def __init__(
        self,
        max_parallelism: int,
        directory: str | os.PathLike[str],
        cache_entries: int = 10_000,
        clock: Callable[[], int] | None = None,
        map_size: int = 1 << 36,
        key_spec: Any = None,
        incremental: bool = False,
    ) -> None:
        if cache_entries < 1:
            raise ValueError(f"cache_entries must be at least 1, got {cache_entries}")
        self.max_parallelism = max_parallelism
        self.key_spec = key_spec  # the declared key type, which decides each key's key group
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.current_key: Any = None
        self.tables: dict[str, LmdbTable] = {}
        self.kinds: dict[str, str] = {}
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        for f in _LMDB_FILES:  # a previous run's working copy
            _remove(os.path.join(self.directory, f))
        shutil.rmtree(os.path.join(self.directory, _SNAPSHOT_COPIES), ignore_errors=True)  # and its snapshots' copies
        # No fsync: a crash loses the working copy anyway, and recovery restores a snapshot.
        # No readahead: state larger than memory is read at random.
        self._env: lmdb.Environment | None = lmdb.open(
            self.directory, map_size=map_size, max_dbs=MAX_STATES, sync=False, metasync=False, readahead=False, meminit=False
        )
        self._max_key = self._env.max_key_size()
        self._capacity = cache_entries
        self._low_water = cache_entries - max(1, cache_entries // 10)  # evict in batches of a tenth
        # Dirty entries in the order they became dirty: evictions write the oldest back past this
        # many, so a barrier finds few to pickle (``_evict``). An OrderedDict: popping the oldest of a
        # plain dict again and again makes ``next(iter(d))`` skip ever more deleted slots.
        self._dirty: OrderedDict[tuple[int, bytes], _Entry] = OrderedDict()
        self._dirty_budget = max(1, cache_entries * 15 // 100)
        # Entries written ahead (``_evict``) that stay dirty, their values mutable: with ``_dirty``,
        # every dirty entry of the cache, so that a barrier never scans the whole cache for them.
        self._sticky: dict[tuple[int, bytes], _Entry] = {}
        self._cache: OrderedDict[tuple[int, bytes], _Entry] = OrderedDict()
        self._rtxn: lmdb.Transaction | None = None  # reused for point reads until the next write
        self._iterating = 0  # read transactions held by unfinished iterations
        self._snapshot_cond = threading.Condition()
        self._snapshots = 0  # read transactions of snapshots not yet read (on the writer thread)
        self._reading = 0  # of which being read now
        self._open_snapshots: list[dict[str, Any]] = []
        self._last_key: Any = _TOMB
        self._prepared: dict[Any, tuple[bytes, bool]] = {}  # a batch's str and int keys, encoded ahead (``prepare_keys``)
        self._last_encoded: tuple[bytes, bool] = (b"", False)
        # Incremental checkpoints: the keys written back since the last snapshot (``incremental``).
        self.changes: ChangeTracker | None = ChangeTracker(max_deltas=MAX_DELTAS) if incremental else None
        self.rolled = RolledCompaction()  # which key groups each checkpoint rebases (rolled_compaction)

    # -- the backend interface (as HeapKeyedStateBackend) ------------------------------
    def table(self, name: str, kind: str) -> "LmdbTable":
        known = self.kinds.get(name)
        if known is not None and known != kind:
            raise StateTypeMismatch(f"state '{name}' was registered as {known} state, not {kind} state")
        self.kinds[name] = kind
        t = self.tables.get(name)
        if t is None:
            self._end_read()  # a read transaction begun before the database existed cannot see it
            try:
                db = self._open_env().open_db(name.encode("utf-8"))
            except lmdb.DbsFullError:
                raise ValueError(f"the LMDB state backend holds at most {MAX_STATES} states; '{name}' is one too many") from None
            t = self.tables[name] = LmdbTable(self, name, len(self.tables), db)
        return t

    def snapshot_by_key_group(self) -> dict[int, dict[str, list[tuple[Any, Any]]]]:
        """{key group: {state name: [(key, value)]}}, read back from LMDB after a flush (values are copies)."""
        self.flush()
        out: dict[int, dict[str, list[tuple[Any, Any]]]] = {}
        with self._open_env().begin() as txn:
            for name, table in self.tables.items():
                for lk, vb in txn.cursor(table.db):
                    key, value = _decode(lk, vb)
                    kg = assign_to_key_group(key, self.max_parallelism, self.key_spec)
                    out.setdefault(kg, {}).setdefault(name, []).append((key, value))
        return out

    def begin_snapshot(self) -> Callable[[], dict[str, list[tuple[bytes, bytes]]]]:
        """On the task thread: write the cache back (what it holds, not the whole state) and open a
        read transaction, LMDB's view of the state at this instant. The returned callable, run once
        on another thread, reads that view: {state name: [(LMDB key, record)]}, raw records in
        key-group order, nothing unpickled (``state_records.decode_record`` decodes them). Writes
        after this call do not reach it."""
        self.flush()
        # list() drives LMDB's cursor from C: no Python code runs per record
        return self._open_snapshot(lambda txn, dbs: {name: list(txn.cursor(db).iternext()) for name, db in dbs.items()})

    def begin_snapshot_parts(self) -> Callable[[Callable[[Iterator[tuple[int, dict[str, list]]]], Any]], Any]:
        """As ``begin_snapshot``, for a snapshot written as it is read (issue 16: state larger than
        memory): the returned callable, run once on another thread with ``consume``, calls
        ``consume(groups)`` inside the read transaction and returns what it returns. ``groups``
        yields ``(key group, {state name: [(LMDB key, record)]})`` in key-group order
        (``record_stream.by_key_group``); only about one key group is in memory at a time.

        The cache is not written back here: its dirty entries are pickled (``_barrier_records``)
        and laid over the read transaction's records as they are handed over, so the task thread
        pauses for the pickling of at most ``cache_entries`` values, not for their LMDB writes."""
        overlay = _by_key_group_prefix(self._barrier_records())
        return self._open_snapshot(
            lambda txn, dbs, consume: consume(_overlaid(by_key_group((name, txn.cursor(db).iternext()) for name, db in dbs.items()), overlay))
        )

    def begin_incremental_snapshot(
        self, checkpoint_id: int, compact: bool = False, live: int | None = None, fork_bases: bool = True
    ) -> tuple[SnapshotPlan, Callable[[], dict[str, list[tuple[bytes, bytes | None]]]]]:
        """As ``begin_snapshot`` for checkpoint ``checkpoint_id`` of an incremental backend: the plan
        (a base, or a delta on the last completed checkpoint's chain) and the callable reading its
        records off the task thread: every record for a base; for a delta, each changed key's record
        at the barrier, or None where it was deleted, sorted by LMDB key. ``compact``, ``live`` and
        ``fork_bases`` are the heap backend's (chains merged from their files, no forked base); ignored here: a base is read from a copy of LMDB's read transaction at the barrier,
        which costs the task thread nothing."""
        plan = self._plan_incremental(checkpoint_id)
        if plan.changed is None:
            return plan, self._open_snapshot(lambda txn, dbs: {name: list(txn.cursor(db).iternext()) for name, db in dbs.items()})
        changed = plan.changed
        return plan, lambda: dict(_changed_records(changed))

    def begin_incremental_snapshot_parts(
        self, checkpoint_id: int, merge: bool = False
    ) -> tuple[SnapshotPlan, Callable[[Callable[[Iterator[tuple[int, dict[str, list]]]], Any]], Any]]:
        """As ``begin_incremental_snapshot``, its records handed over as ``begin_snapshot_parts``
        does: a base is read off the read transaction a key group at a time, never whole, with the
        cache's dirty records laid over it; a delta comes from the records the change tracker kept
        (``ChangeTracker.record``; the barrier adds the dirty cache entries' records to them without
        writing them back), grouped by key group, with no read of LMDB. ``merge``: the caller can read
        the chain's files, and compacts a few key groups of it per checkpoint (``SnapshotPlan.rolled``)."""
        if self.changes is None:
            raise ValueError("this LMDB state backend was not opened for incremental checkpoints")
        barrier = self._barrier_records(self.changes)
        # the dirty entries not written yet count as live: an upper bound (some are on disk too)
        plan = self.changes.plan(checkpoint_id, self._live_entries() + sum(map(len, barrier.values())), merge=merge, rolled=merge)
        if plan.changed is None:
            overlay = _by_key_group_prefix(barrier)
            return plan, self._open_snapshot(
                lambda txn, dbs, consume: consume(_overlaid(by_key_group((name, txn.cursor(db).iternext()) for name, db in dbs.items()), overlay))
            )
        changed = plan.changed
        return plan, lambda consume: consume(_changed_groups(changed))

    def _plan_incremental(self, checkpoint_id: int) -> SnapshotPlan:
        if self.changes is None:
            raise ValueError("this LMDB state backend was not opened for incremental checkpoints")
        self.flush()  # the write-backs it does are changes of this checkpoint
        return self.changes.plan(checkpoint_id, self._live_entries())

    def _live_entries(self) -> int:
        """Entries in LMDB now (the cache's unwritten new keys aside), which the base rule weighs the chain against."""
        self._end_read()
        with self._open_env().begin() as txn:
            return sum(int(txn.stat(t.db)["entries"]) for t in self.tables.values())

    def _barrier_records(self, changes: ChangeTracker | None = None) -> dict[str, dict[bytes, bytes | None]]:
        """The records of the cache's dirty entries as of now (None: deleted), {state: {LMDB key: record}},
        without writing them back: they stay dirty and reach LMDB when evicted or flushed. Those
        the tracker does not hold yet are also recorded into ``changes``, and each entry is marked
        with the value recorded (``logged``): its later write-back is not a change again if the
        value is still that object and immutable (``_commit`` checks). This runs on the task thread
        at the barrier, so it is kept to list comprehensions and ``map``."""
        # Exactly the dirty entries, not a scan of the cache (a cache miss an entry: 6-7 ms for
        # 10,000 on a slow 2-core machine, at every barrier). Every entry of ``_dirty`` and
        # ``_sticky`` is in the cache (whatever leaves the cache leaves them too), so no lookup
        # checks it: a dict of (table, key) tuples built and probed here was a third of the
        # barrier's time (1-2.7 ms of 3.5-8 for 1,700 entries at 1.5 M string keys, offline).
        if self._sticky:  # an entry may be in both: merged by key
            candidates = self._sticky.copy()
            candidates.update(self._dirty)
            dirty = [e for e in candidates.values() if e.dirty]
        else:
            dirty = [e for e in self._dirty.values() if e.dirty]
        dumps, tomb, wrapped = pickle.dumps, _TOMB, _WRAPPED
        try:  # ``_record`` inlined: a call per entry is a third of the time here
            records = [
                None if e.value is tomb else wrapped + dumps((e.key, e.value), 5) if e.wrapped else dumps(e.value, 5)
                for e in dirty
            ]
        except Exception:
            records = list(map(_record, dirty))  # raises with the state and key that failed
        names = {e.table.name for e in dirty}
        if len(names) == 1:  # the usual case: one keyed state
            out = {names.pop(): dict(zip([e.lk for e in dirty], records))}
        else:
            out = {}
            for e, vb in zip(dirty, records):
                out.setdefault(e.table.name, {})[e.lk] = vb
        if changes is not None:
            # A mutable value recorded before may have been changed in place since: recorded again.
            fresh = [
                (e, vb) for e, vb in zip(dirty, records)
                if e.logged is not e.value or not (e.value is tomb or immutable(e.value))
            ]
            if len(fresh) == len(dirty):
                for name, recs in out.items():
                    changes.record_many(name, recs)
            else:
                for e, vb in fresh:
                    changes.record(e.table.name, e.lk, vb)
            for e in dirty:
                e.logged = e.value
        return out

    def resume_incremental(self, chain: Any) -> None:
        """Restored exactly from ``chain``: the next checkpoint may be a delta on it."""
        if self.changes is not None:
            self.changes.resume(chain)
            self.rolled.reset()

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """The next delta rests on this checkpoint's chain (incremental backends only)."""
        if self.changes is not None:
            self.changes.confirm(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        if self.changes is not None:
            self.changes.abort(checkpoint_id)

    def _open_snapshot(self, reader: Callable[..., Any]) -> Callable[..., Any]:
        """A read transaction, LMDB's view of the state now; the returned callable, run once on
        another thread, copies that view into a file of its own, ends the transaction, and runs
        ``reader(txn, dbs, *args)`` on the copy ({state name: its database in the copy}), which it
        deletes afterwards.

        Why a copy: LMDB cannot reuse a page freed after a read transaction began, so a transaction
        held while a snapshot is encoded and written at Python's pace made the file grow by every
        page the task rewrote meanwhile (several times the state with full checkpoints every 2 s).
        LMDB's compacting copy runs in C with the interpreter lock released (3 M keys, 91 MB: about
        0.15 s here), so the live transaction lasts that long, not the whole write."""
        env = self._open_env()
        names = list(self.tables)
        with self._snapshot_cond:
            txn = env.begin()
            self._snapshots += 1
            state: dict[str, Any] = {"txn": txn}  # the transaction until it is copied or the backend closes
            self._open_snapshots.append(state)

        def read(*args: Any) -> Any:
            with self._snapshot_cond:
                if state["txn"] is None:
                    raise ValueError("the LMDB state backend was closed before this snapshot was read")
                self._reading += 1
            directory = os.path.join(self.directory, _SNAPSHOT_COPIES, uuid.uuid4().hex)
            copy: lmdb.Environment | None = None
            try:
                try:
                    os.makedirs(directory)
                    env.copy(directory, compact=True, txn=txn)
                except (OSError, lmdb.Error) as e:
                    # No room for the copy (or no copy here): read the transaction itself, as before
                    # copies, at the cost of the file's growth while it is read.
                    _log.warning("LMDB state snapshot read without a copy (%s): the file may grow while it is written", e)
                    return reader(txn, {name: self.tables[name].db for name in names}, *args)
                with self._snapshot_cond:
                    self._end_snapshot(state)
                # read in order, once: readahead (the live file's random reads go without; here
                # without it reading 1 M records took 1.0 s against 0.3 s)
                copy = lmdb.open(directory, readonly=True, lock=False, max_dbs=MAX_STATES, readahead=True)
                with copy.begin() as copied:
                    dbs = {name: copy.open_db(name.encode("utf-8"), txn=copied, create=False) for name in names}
                    return reader(copied, dbs, *args)
            finally:
                if copy is not None:
                    copy.close()
                shutil.rmtree(directory, ignore_errors=True)
                with self._snapshot_cond:
                    self._reading -= 1
                    self._end_snapshot(state)

        return read

    def _end_snapshot(self, state: dict[str, Any]) -> None:
        """Abort one snapshot's transaction (under ``_snapshot_cond``)."""
        if state["txn"] is not None:
            state["txn"].abort()
            state["txn"] = None
            self._snapshots -= 1
            self._open_snapshots.remove(state)
            self._snapshot_cond.notify_all()

    def restore_records(
        self, name: str, kind: str, rows: list[tuple[bytes, bytes | None]], delta: bool = False, record_keys: int = RECORD_KEYS_VERSION
    ) -> None:
        """Put raw records of ``begin_snapshot`` back as they are (no unpickling). ``delta``: records
        of an incremental delta, applied over what is there: None deletes its key. A restore calls
        this a part (a key group) at a time, so nothing bigger is ever in memory (issue 16).
        ``record_keys``: the version of the snapshot's record keys; an older one's int and str keys
        are re-encoded (``state_records.upgrade_keys``)."""
        if record_keys < RECORD_KEYS_VERSION:
            rows = upgrade_keys(rows, record_keys)
        t = self.table(name, kind)
        for ck in [ck for ck, e in self._cache.items() if e.table is t]:
            del self._cache[ck]
        self._forget_dirty(t)
        self._end_read()
        env = self._open_env()
        while True:
            try:
                with env.begin(write=True) as txn:
                    cursor = txn.cursor(t.db)
                    if not delta:
                        cursor.putmulti(rows)
                    else:
                        for lk, vb in rows:
                            if vb is None:
                                if cursor.set_key(lk):
                                    cursor.delete()
                            else:
                                cursor.put(lk, vb)
                return
            except lmdb.MapFullError:
                self._grow(env)

    def _grow(self, env: lmdb.Environment) -> None:
        if self._iterating:  # remapping under an open read transaction is unsafe in LMDB
            raise lmdb.MapFullError("the LMDB state backend is full while a table is being iterated")
        with self._snapshot_cond:  # and under a snapshot's: wait for snapshots in flight
            while self._snapshots:
                self._snapshot_cond.wait()
            env.set_mapsize(env.info()["map_size"] * 2)

    # -- lifecycle -----------------------------------------------------------------------
    def flush(self) -> None:
        """Write every cached entry to LMDB; entries stay cached."""
        self._flush(None)

    def close(self) -> None:
        """Drop the cache and delete the working copy; the state is gone unless it was snapshotted."""
        if self._env is None:
            return
        self._end_read()
        with self._snapshot_cond:  # a snapshot still reading would read unmapped memory: wait for it
            self._snapshot_cond.wait_for(lambda: not self._reading)
            for state in list(self._open_snapshots):  # never read: they fail when they are
                self._end_snapshot(state)
        self._cache.clear()
        self._dirty.clear()
        self._sticky.clear()
        self._env.close()
        self._env = None
        for f in _LMDB_FILES:
            _remove(os.path.join(self.directory, f))
        shutil.rmtree(os.path.join(self.directory, _SNAPSHOT_COPIES), ignore_errors=True)  # no snapshot reads now
        try:
            os.rmdir(self.directory)
        except OSError:
            pass  # not empty: it holds more than our files

    def __enter__(self) -> "LmdbKeyedStateBackend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- keys ----------------------------------------------------------------------------
    def prepare_keys(self, keys: list[Any]) -> None:
        """Encode a batch's keys ahead of its reads and writes (a reduce's batch, ``batch_access``) when
        each is a str or an int: their key groups hashed in numpy at once (``key_group_batch``, exactly
        the scalar hash), where ``_encode`` hashes a key at a time in Python (a string key's Java hash:
        4.4 us against 0.25 us in batches of 512, of a record path of about 15 us)."""
        self._prepared = {}
        if not keys or not set(map(type, keys)) <= _PREPARED_TYPES:
            return
        limit = self._max_key - KG_BYTES - STR_PICKLE_SLACK
        kgs = assign_to_key_groups(keys, self.max_parallelism, self.key_spec)
        kgs = kgs.tolist() if hasattr(kgs, "tolist") else kgs
        self._prepared = {
            k: (kg.to_bytes(KG_BYTES, "big") + kb, False)
            for k, kg, kb in zip(keys, kgs, map(encode_key, keys))
            if len(kb) <= limit  # longer: perhaps a digest, as _encode decides
        }

    def _encode(self, key: Any) -> tuple[bytes, bool]:
        """(LMDB key, whether records must carry the original key)."""
        if key is self._last_key:  # a read then a write of one key (keys are immutable)
            return self._last_encoded
        t = type(key)
        if t is str or t is int:  # a bool or a float equal to a prepared int is not that int's entry
            encoded = self._prepared.get(key)
            if encoded is not None:
                self._last_key, self._last_encoded = key, encoded
                return encoded
        if t is str or t is int or t is bytes:  # one object: memoization cannot vary
            kb, wrapped = encode_key(key), False
        else:
            c = canonical(key)
            tc = type(c)
            if tc is msgpack.ExtType and c.code == EXT_BIGINT:
                c, tc = int(c.data), int
            if tc is str or tc is int or tc is bytes or tc is float or c is None:
                # A scalar, or equal to one (True, 1.0, Decimal("2.5")): the scalar's entry.
                kb, wrapped = encode_key(c), c is not key
            else:
                kb, wrapped = _PACKED + msgpack.packb(c, use_bin_type=True), True
        prefix = key_group_prefix(assign_to_key_group(key, self.max_parallelism, self.key_spec))
        if len(kb) + KG_BYTES + STR_PICKLE_SLACK > self._max_key and len(src := digest_source(kb)) + KG_BYTES > self._max_key:
            encoded = prefix + _HASHED + hashlib.blake2b(src, digest_size=32).digest(), True
        else:
            encoded = prefix + kb, wrapped
        self._last_key, self._last_encoded = key, encoded
        return encoded

    # -- the cache -----------------------------------------------------------------------
    def _admit(self, ck: tuple[int, bytes], entry: _Entry) -> None:
        if len(self._cache) >= self._capacity:
            self._evict()  # before inserting, so the entry being handed out is never the victim
        self._cache[ck] = entry

    def _evict(self) -> None:
        """Write back and drop the oldest tenth of the cache; also write back (and keep) the oldest
        dirty entries past ``_dirty_budget`` (15 % of the cache), so a barrier, which pickles every
        dirty entry on the task thread, finds few (issue 16). An entry left untouched that long is
        written once either way; only one changed again later is written twice."""
        cache, dirty = self._cache, self._dirty
        pinned = self._encode(self.current_key)[0]
        excess = len(cache) - self._low_water
        victims = []
        for ck, e in cache.items():
            if len(victims) >= excess:
                break
            if e.lk != pinned:
                victims.append(ck)
        sticky = self._sticky
        for ck in victims:
            dirty.pop(ck, None)
            sticky.pop(ck, None)
        ahead: list[_Entry] = []
        while len(dirty) > self._dirty_budget:
            ck, e = dirty.popitem(last=False)
            if e.dirty and cache.get(ck) is e:
                ahead.append(e)
        self._commit([cache[ck] for ck in victims] + ahead)  # raises before anything leaves the cache
        for ck in victims:
            del cache[ck]
        for e in ahead:
            e.dirty = e.value is not _TOMB and not immutable(e.value)
            if e.dirty:  # a mutable value: it may be changed in place and must reach the next barrier
                sticky[(e.table.tid, e.lk)] = e

    def _forget_dirty(self, table: "LmdbTable") -> None:
        """Drop the entries of ``table`` (about to leave the cache) from the dirty order."""
        self._dirty = OrderedDict((ck, e) for ck, e in self._dirty.items() if e.table is not table)
        self._sticky = {ck: e for ck, e in self._sticky.items() if e.table is not table}

    def _flush(self, table: "LmdbTable | None") -> None:
        entries = [e for e in self._cache.values() if e.dirty and (table is None or e.table is table)]
        self._commit(entries)
        for e in entries:
            e.dirty = e.value is not _TOMB and not immutable(e.value)
        self._dirty = OrderedDict((ck, e) for ck, e in self._dirty.items() if e.dirty)
        self._sticky = {ck: e for ck, e in self._sticky.items() if e.dirty}

    # -- LMDB ------------------------------------------------------------------------------
    def _open_env(self) -> lmdb.Environment:
        if self._env is None:
            raise ValueError("the LMDB state backend is closed")
        return self._env

    def _read(self, db: Any, lk: bytes) -> bytes | None:
        txn = self._rtxn
        if txn is None:
            txn = self._rtxn = self._open_env().begin()
        return txn.get(lk, db=db)

    def _end_read(self) -> None:
        if self._rtxn is not None:
            self._rtxn.abort()
            self._rtxn = None

    def _commit(self, entries: list[_Entry]) -> None:
        """Write dirty entries (deleting tombstones) in one transaction."""
        dirty = [e for e in entries if e.dirty]
        if not dirty:
            return
        ops = [(e.table.db, e.lk, _record(e)) for e in dirty]
        if self.changes is not None:
            record = self.changes.record
            for e, (_, lk, vb) in zip(dirty, ops):
                # else this very value was recorded last, and nothing can have changed it in place
                if e.logged is not e.value or not (e.value is _TOMB or immutable(e.value)):
                    record(e.table.name, lk, vb)
                    # now the tracker's newest record of the key: a barrier that finds the value
                    # changed back to the object recorded before must record it again
                    e.logged = e.value
        env = self._open_env()
        self._end_read()
        while True:
            try:
                with env.begin(write=True) as txn:
                    for db, lk, vb in ops:
                        if vb is None:
                            txn.delete(lk, db=db)
                        else:
                            txn.put(lk, vb, db=db)
                return
            except lmdb.MapFullError:
                self._grow(env)

    def _drop(self, table: "LmdbTable") -> None:
        if self.changes is not None:
            self.changes.table_cleared()  # a delta cannot say "everything went": the next one is a base
        for ck in [ck for ck, e in self._cache.items() if e.table is table]:
            del self._cache[ck]
        self._forget_dirty(table)
        self._end_read()
        with self._open_env().begin(write=True) as txn:
            txn.drop(table.db, delete=False)


def _record(e: _Entry) -> bytes | None:
    if e.value is _TOMB:
        return None
    try:
        if e.wrapped:
            return _WRAPPED + pickle.dumps((e.key, e.value), 5)
        return pickle.dumps(e.value, 5)
    except Exception as exc:
        raise TypeError(f"state '{e.table.name}' holds a value for key {e.key!r} that cannot be pickled: {exc}") from exc


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class LmdbTable(MutableMapping):
    """One state's key -> value map: the cache in front, an LMDB named database behind.

    Iteration and ``len`` flush this table's cached entries first, then read one
    LMDB snapshot; cached entries are handed out as their live objects. Entries
    added while iterating are not seen (a dict would raise instead).
    """

    def __init__(self, backend: LmdbKeyedStateBackend, name: str, tid: int, db: Any) -> None:
        self.backend = backend
        self.name = name
        self.tid = tid
        self.db = db

    def prepare_keys(self, keys: list[Any]) -> None:
        """A batch's keys are about to be read and written: encode them ahead (``LmdbKeyedStateBackend.prepare_keys``)."""
        self.backend.prepare_keys(keys)

    def _entry(self, key: Any) -> _Entry:
        """The cached entry of ``key``; on a miss it is read from LMDB, or cached as known to be absent."""
        b = self.backend
        lk, wrapped = b._encode(key)
        ck = (self.tid, lk)
        e = b._cache.get(ck)
        if e is not None:
            b._cache.move_to_end(ck)
            return e
        vb = b._read(self.db, lk)
        if vb is None:
            e = _Entry(self, lk, key, _TOMB, False, wrapped)
        elif vb[:1] == _WRAPPED:
            k, v = pickle.loads(vb[1:])
            e = _Entry(self, lk, k, v, not immutable(v), True)
        else:  # a plain record was written with its canonical key: that key, not the equal one asked for
            v = pickle.loads(vb)
            e = _Entry(self, lk, decode_key(lk[KG_BYTES:]) if wrapped else key, v, not immutable(v), False)
        b._admit(ck, e)
        if e.dirty:  # a mutable value: the caller may change it in place
            b._dirty[ck] = e
        return e

    def __getitem__(self, key: Any) -> Any:
        v = self._entry(key).value
        if v is _TOMB:
            raise KeyError(key)
        return v

    def get(self, key: Any, default: Any = None) -> Any:
        v = self._entry(key).value
        return default if v is _TOMB else v

    def __contains__(self, key: object) -> bool:
        return self._entry(key).value is not _TOMB

    def __setitem__(self, key: Any, value: Any) -> None:
        b = self.backend
        lk, wrapped = b._encode(key)
        ck = (self.tid, lk)
        e = b._cache.get(ck)
        if e is None:  # a blind write: no need to read what it replaces
            e = _Entry(self, lk, key, value, True, wrapped)
            b._admit(ck, e)
        else:
            b._cache.move_to_end(ck)
            e.value, e.dirty = value, True
        b._dirty[ck] = e

    def setdefault(self, key: Any, default: Any = None) -> Any:
        e = self._entry(key)
        if e.value is _TOMB:
            e.value, e.dirty = default, True
            self.backend._dirty[(self.tid, e.lk)] = e
        return e.value

    _NO_DEFAULT = object()

    def pop(self, key: Any, default: Any = _NO_DEFAULT) -> Any:
        e = self._entry(key)
        v = e.value
        if v is _TOMB:
            if default is LmdbTable._NO_DEFAULT:
                raise KeyError(key)
            return default
        e.value, e.dirty = _TOMB, True
        self.backend._dirty[(self.tid, e.lk)] = e
        return v

    def __delitem__(self, key: Any) -> None:
        e = self._entry(key)
        if e.value is _TOMB:
            raise KeyError(key)
        e.value, e.dirty = _TOMB, True
        self.backend._dirty[(self.tid, e.lk)] = e

    def clear(self) -> None:
        self.backend._drop(self)

    def _items(self) -> Iterator[tuple[Any, Any]]:
        b = self.backend
        b._flush(self)
        cache, tid = b._cache, self.tid
        b._iterating += 1
        try:
            with b._open_env().begin() as txn:  # its own snapshot: evictions while iterating leave it alone
                for lk, vb in txn.cursor(self.db):
                    e = cache.get((tid, lk))
                    if e is None:
                        yield _decode(lk, vb)
                    elif e.value is not _TOMB:
                        yield e.key, e.value
        finally:
            b._iterating -= 1

    def __iter__(self) -> Iterator[Any]:
        return (k for k, _ in self._items())

    def items(self) -> ItemsView:
        return _Items(self)

    def values(self) -> ValuesView:
        return _Values(self)

    def __len__(self) -> int:
        b = self.backend
        b._flush(self)
        with b._open_env().begin() as txn:
            return int(txn.stat(self.db)["entries"])

    def __repr__(self) -> str:
        return f"<LmdbTable {self.name!r}>"


class _Items(ItemsView):
    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return self._mapping._items()


class _Values(ValuesView):
    def __iter__(self) -> Iterator[Any]:
        return (v for _, v in self._mapping._items())


def _changed_records(changed: Mapping[str, Mapping[bytes, bytes | None]]) -> Iterator[tuple[str, list[tuple[bytes, bytes | None]]]]:
    """A delta's records: per state, each changed key's record at the barrier (None where it was
    deleted), sorted by LMDB key (so by key group), from the tracker's records."""
    for name, records in changed.items():
        yield name, sorted(records.items())


def _changed_groups(changed: Mapping[str, Mapping[bytes, bytes | None]]) -> Iterator[tuple[int, dict[str, list[tuple[bytes, bytes | None]]]]]:
    """A delta's records as ``by_key_group`` hands a base's over: ``(key group, {state: records})`` in
    key-group order. Grouped by their key-group prefix rather than sorted: a restore needs the key
    groups apart, not the keys in order, and sorting bytes in Python costs several times more
    (no fast comparison for bytes in ``list.sort``). The keys and records are listed side by side in
    the tracker's order, their prefixes read into numpy and ordered by key group there (a stable
    sort of small integers); a key group's records are taken from the two lists in C as it is
    handed over. A Python loop per record, and then a lookup per record in a dict of a million keys,
    were a third of the writer's time with string keys (offline, 850,000 string-keyed records:
    0.35-0.43 s against 0.88-0.91 s). The writer adds two references and a 4-byte position per
    changed key, and one key group's records, to what the tracker holds."""
    if np is None:
        yield from _changed_groups_scalar(changed)
        return
    listed: dict[int, tuple[str, list[bytes], list[bytes | None]]] = {}  # the tables with changes, by position
    runs: dict[int, list[tuple[int, Any]]] = {}  # key group -> [(table, positions in its lists)]
    for t, (name, records) in enumerate(changed.items()):
        n = len(records)
        if not n:
            continue
        keys = _listed(iter(records), n)
        order, spans = key_group_order(np.concatenate([_prefixes(keys[lo : lo + _GROUP_BLOCK]) for lo in range(0, n, _GROUP_BLOCK)]))
        order = order.astype(np.int32)  # kept until handed over: half the bytes
        for kg, lo, hi in spans:
            runs.setdefault(kg, []).append((t, order[lo:hi]))
        # listed after the sort, so the sort's scratch and both lists are never held at once
        listed[t] = name, keys, _listed(iter(records.values()), n)  # the keys' order: nobody changes the dict now
    for kg in sorted(runs):
        tables: dict[str, list[tuple[bytes, bytes | None]]] = {}
        for t, positions in runs.pop(kg):
            name, keys, values = listed[t]
            idx = positions.tolist()
            tables[name] = list(zip(_take(keys, idx), _take(values, idx)))
        yield kg, tables


def _changed_groups_scalar(changed: Mapping[str, Mapping[bytes, bytes | None]]) -> Iterator[tuple[int, dict[str, list[tuple[bytes, bytes | None]]]]]:
    """``_changed_groups`` without numpy: a bare Python on a Spark executor, which has no checkpoint to
    write; kept so that the backend answers the same everywhere."""
    groups: dict[int, dict[str, list[tuple[bytes, bytes | None]]]] = {}
    for name, records in changed.items():
        for lk, vb in records.items():
            groups.setdefault(int.from_bytes(lk[:KG_BYTES], "big"), {}).setdefault(name, []).append((lk, vb))
    for kg in sorted(groups):
        yield kg, groups.pop(kg)


def _listed(items: Iterator[Any], n: int) -> list[Any]:
    """The ``n`` items of ``items`` as a list, filled a block at a time: one C call over a million
    entries holds the interpreter lock for milliseconds, which a barrier on the task thread would
    wait for. Allocated whole at the start, so it takes no more memory than ``list(items)``."""
    out: list[Any] = [None] * n
    for lo in range(0, n, _GROUP_BLOCK):
        out[lo : lo + _GROUP_BLOCK] = itertools.islice(items, _GROUP_BLOCK)
    return out


def _prefixes(keys: list[bytes]) -> Any:
    """The key group of each LMDB key (its first ``KG_BYTES`` bytes, big-endian) as a numpy array, read
    a byte column at a time in C."""
    high = np.frombuffer(bytes(map(operator.itemgetter(0), keys)), dtype=np.uint8).astype(np.uint16)
    return (high << 8) | np.frombuffer(bytes(map(operator.itemgetter(1), keys)), dtype=np.uint8)


def _by_key_group_prefix(records: Mapping[str, Mapping[bytes, bytes | None]]) -> dict[int, dict[str, dict[bytes, bytes | None]]]:
    """{key group: {state: {LMDB key: record}}} of a barrier's records."""
    out: dict[int, dict[str, dict[bytes, bytes | None]]] = {}
    for name, recs in records.items():
        for lk, vb in recs.items():
            out.setdefault(int.from_bytes(lk[:KG_BYTES], "big"), {}).setdefault(name, {})[lk] = vb
    return out


def _overlaid(
    groups: Iterator[tuple[int, dict[str, list[tuple[bytes, bytes]]]]],
    overlay: dict[int, dict[str, dict[bytes, bytes | None]]],
) -> Iterator[tuple[int, dict[str, list[tuple[bytes, bytes]]]]]:
    """A read transaction's records by key group with the barrier's records laid over them (a
    record replaces the stored one, None deletes it), key groups only the overlay has included, in
    key-group order. A key group's records are not sorted again: a restore puts them back in any
    order."""
    pending = sorted(overlay)
    i = 0

    def only(kg: int) -> dict[str, list[tuple[bytes, bytes]]]:
        return {name: [(lk, vb) for lk, vb in recs.items() if vb is not None] for name, recs in overlay[kg].items()}

    for kg, tables in groups:
        while i < len(pending) and pending[i] < kg:
            yield pending[i], only(pending[i])
            i += 1
        if i < len(pending) and pending[i] == kg:
            i += 1
            for name, recs in overlay[kg].items():
                merged = dict(tables.get(name, ()))
                merged.update(recs)
                tables[name] = [(lk, vb) for lk, vb in merged.items() if vb is not None]
        yield kg, tables
    for kg in pending[i:]:
        yield kg, only(kg)
