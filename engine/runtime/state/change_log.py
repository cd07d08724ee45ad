"""The change log of a heap table written a batch at a time: the batches' keys and values, kept.

A heap table tracked for incremental checkpoints records its written keys in a change set, and the
delta's writer looks each changed key's value up in the table after the barrier
(``heap_incremental``). With millions of keys changing per interval both halves are memory misses: a
key added to a set of millions lands on a cold line, and the writer touches every key's dict entry
and value object again, long after the reduce that wrote them (issue 16: 1.6-2.1 us a key on the
writer on a slow 2-core VM, 250 ns a record on the task thread for the set).

A reduce writes whole values a batch at a time (``heap_incremental.batch_access``) and has the
batch's keys and new values in hand, in cache. When they are numbers (``state_columns``), the
batch is copied there and appended to the table's log: as marshal's bytes where every int fits in
int32 (``marshalled_batch``: one C pass, read as columns by the writer), else into columns. The
values are the ones the keys hold at the end of the batch, and no barrier falls inside a batch, so
each key's newest entry in the log is its value at the barrier. The writer then needs no lookup, no
copy-on-write and no lock: it reads the columns, keeps each key's newest entry with a sort
(``newest``), and hashes the keys to their key groups, all in numpy.

String keys with values of strings and numbers (a reduce's ``(word, count)``) are encoded as text
columns while the batch is in cache (``string_columns.batch``: the joined UTF-8 bytes of each string
column and the numbers as arrays, about 200 ns a record), so the log holds bytes and the batch's
objects are freed at once; the writer sorts them by key group and keeps each key's newest entry in
numpy (``heap_incremental._logged_text``), never meeting the objects cold (issue 16, change 27).
Other values that cannot change in place (tuples holding None, bytes, nested tuples;
``immutability.flat_immutable``) are logged as the batch's two lists themselves (``Refs``),
copied, which is cheaper on the task thread than adding the keys to a set of millions. The writer
takes each key's newest value with a dict built a batch at a time (``newest_objects``) and pickles
them, still with no lookup in the table, no copy-on-write view and no lock; where the records hit
distinct keys, as last measured, it writes the batches as logged, with no dict (``slices``,
``heap_incremental._logged_objects``). A mutable value (a list
a reduce appends to) is never logged: its barrier value is the copy-on-write view's to keep.

A log is kept only where it pays: for a table with many keys (``MIN_KEYS``), written by batches of
immutable values, whose records mostly hit distinct keys (a few hot keys are cheaper in a set:
their set entries stay in cache, while a log grows with every record). Any other write to the table
(``TrackedTable.__setitem__``, ``pop``, a batch of mutable values) first moves the log's keys into the
change set and the interval goes on with the set, so a key's newest change is never split between
the two (``TrackedTable._unlog``).
"""
from __future__ import annotations

import itertools
import os
from typing import Any, Iterator, Sequence

from millstream.engine.runtime.state import marshalled_batch, state_columns, string_columns
from millstream.engine.runtime.state.marshalled_batch import Marshalled
from millstream.engine.runtime.state.state_columns import Columns

try:
    import numpy as np
except ImportError:  # a bare Python on a Spark executor: no log is ever kept (state_columns is off too)
    np = None

# A table logs from the cut after it holds this many keys: below, its change set is small enough to
# stay in cache and costs less than copying each batch into columns. The variable lets a test run a
# small job on real processes through the log.
MIN_KEYS = int(os.environ.get("MILLSTREAM_CHANGE_LOG_MIN_KEYS", "65536"))
# Records per distinct key changed, at most, for the next interval to log: more repeats than this
# and the set (one entry per key) is cheaper than the log (one entry per record).
MIN_DISTINCT = 0.5


class ChangeLog:
    """One interval's batches of one table in the order written: numbers keyed by ints as marshal's
    bytes (``Marshalled``) or ``Columns``, string keys as text columns (an unpickled
    ``string_columns`` frame), or the batch's keys and values themselves (``Refs``) where they are
    other immutable objects. Never
    changed once cut: a snapshot's writer (and a later one's, if that checkpoint fails) reads it as
    it is."""

    __slots__ = ("batches", "entries", "refs", "text")

    def __init__(self) -> None:
        self.batches: list[Columns | Marshalled | Refs | tuple[Any, ...]] = []
        self.entries = 0
        self.refs = False  # any batch held as objects: the log is read back as objects (``newest_objects``)
        self.text = False  # any batch held as text columns: no numbers may follow (``newest`` reads those)

    def __len__(self) -> int:
        return self.entries

    def add(self, batch: Columns) -> None:
        if len(batch.keys):  # an empty batch has no value spec to merge by
            self.batches.append(batch)
            self.entries += len(batch.keys)

    def add_marshalled(self, batch: Marshalled) -> None:
        """A batch of numbers keyed by ints as marshal's bytes (``marshalled_batch``): read as columns."""
        self.batches.append(batch)
        self.entries += batch.count

    def add_text(self, frame: tuple[Any, ...]) -> None:
        """A batch of string keys as text columns (``string_columns.batch``: an unpickled frame)."""
        self.batches.append(frame)
        self.entries += frame[2]
        self.text = True

    def add_refs(self, keys: list[Any], values: list[Any]) -> None:
        """A batch of immutable values (``immutability.flat_immutable``), as the lists given: the
        caller's own copies, which nobody changes."""
        if keys:
            self.batches.append(Refs(keys, values))
            self.entries += len(keys)
            self.refs = True

    def keys(self) -> list[Any]:
        """Every key logged, as Python objects (for the change set the log is moved into)."""
        return list(itertools.chain.from_iterable(_keys(b) for b in self.batches))


class Refs:
    """A logged batch of objects: its keys and the values written for them, in order. Holding them
    costs two list copies on the task thread; the objects are shared with the table, which is safe
    since none of them can change in place."""

    __slots__ = ("keys", "values")

    def __init__(self, keys: list[Any], values: list[Any]) -> None:
        self.keys = keys
        self.values = values


def _keys(batch: Columns | Marshalled | Refs | tuple[Any, ...]) -> list[Any]:
    if type(batch) is Refs:
        return batch.keys
    if type(batch) is tuple:
        return string_columns.decode(batch)[1]
    if type(batch) is Marshalled:
        return marshalled_batch.keys(batch)
    return batch.keys.tolist()


def _objects(batch: Columns | Marshalled | Refs | tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
    if type(batch) is Refs:
        return batch.keys, batch.values
    if type(batch) is tuple:
        _, keys, values, _ = string_columns.decode(batch)
        return keys, values
    if type(batch) is Marshalled:
        return marshalled_batch.objects(batch)
    return batch.keys.tolist(), batch.values()


def newest_objects(logs: Sequence[ChangeLog]) -> dict[Any, Any]:
    """Each key of ``logs`` (one table's, oldest first) with its newest value, as a dict in the order
    the keys were first logged: for logs holding objects (``ChangeLog.refs``); a log of columns among
    them is read as objects too. Built a batch at a time: each update is a short C call, so the
    writer never holds the interpreter lock for long, however many keys changed."""
    newest: dict[Any, Any] = {}
    for log in logs:
        for batch in log.batches:
            keys, values = _objects(batch)
            newest.update(zip(keys, values))
    return newest


def slices(logs: Sequence[ChangeLog], size: int) -> Iterator[tuple[list[Any], list[Any]]]:
    """The keys and values of ``logs`` (one table's, oldest first) in the order logged, as lists of
    whole batches, about ``size`` entries each (a log of columns read as objects)."""
    keys: list[Any] = []
    values: list[Any] = []
    for log in logs:
        for batch in log.batches:
            k, v = _objects(batch)
            keys.extend(k)
            values.extend(v)
            if len(keys) >= size:
                yield keys, values
                keys, values = [], []
    if keys:
        yield keys, values


def newest(logs: Sequence[ChangeLog]) -> tuple[Any, list[Columns]]:
    """The keys of ``logs`` (one table's, oldest first) each with its newest entry: (the keys, sorted,
    as int64; one ``Columns`` per value spec, each with its keys in sorted order)."""
    batches = marshalled_batch.decoded([c for log in logs for c in log.batches])
    specs = list(dict.fromkeys(c.spec for c in batches))
    if len(specs) == 1:  # the usual case: a chain's merge of one spec's frames, no deletions among them
        merged = state_columns.merge(batches, base=True)
        return merged.keys, [merged]
    name = batches[0].name
    keys = np.concatenate([c.keys for c in batches])
    uniq, first = np.unique(keys[::-1], return_index=True)
    at = len(keys) - 1 - first  # each key's newest entry, as a position in ``keys``
    width = {s: len(s) if isinstance(s, tuple) else 1 for s in specs}
    # Batches of several specs (ints in some, floats in others): each position's spec, and its row
    # among the positions of that spec, to take the newest entries of each spec from its own columns.
    sizes = [len(c.keys) for c in batches]
    spec_ids = np.repeat(np.array([specs.index(c.spec) for c in batches]), sizes)
    row = np.empty(len(keys), dtype=np.int64)
    for s in range(len(specs)):
        mine = spec_ids == s
        row[mine] = np.arange(int(mine.sum()))
    out = []
    for s, spec in enumerate(specs):
        take = at[spec_ids[at] == s]
        if not len(take):
            continue
        mine = [c for c in batches if c.spec == spec]
        cols = tuple(np.concatenate([c.cols[i] for c in mine])[row[take]] for i in range(width[spec]))
        out.append(Columns(name, keys[take], spec, cols, np.empty(0, dtype=np.int64)))
    return uniq, out


def without(c: Columns, sets: Sequence[set[Any]]) -> Columns:
    """``c`` without the keys in any of ``sets`` (a Python lookup per key: only where a delta holds
    change sets and logs of one table, after a checkpoint failed or the table stopped logging)."""
    keys = c.keys.tolist()
    drop = np.fromiter((any(k in s for s in sets) for k in keys), dtype=bool, count=len(keys))
    return state_columns.rows(c, ~drop)
