"""The heap backend's shared state files: their frames, their parts, and what reads them back.

The writer of a delta (``heap_incremental``) and the forked child of a base produce parts here;
rolled compaction (``rebase``, ``merge``) and restores (``replay_key_groups``) read them.

The files go to the job's ``shared/`` directory and are reference-counted by the coordinator's
``SharedStateRegistry``, exactly as the on-disk backend's (``incremental``). A frame here is typed
columns where keys and values are numbers (``state_columns``: compaction merges those in numpy,
``_Slot``), text columns where they are strings and numbers (``string_columns``: merged in numpy too
where the keys are strings), else a pickle of ``(state name, {key: value}, [deleted key])`` or of its columns form
(``columns_frame``; ``[(key, value)]`` in files written before). Files are
grouped by key group (``SharedFile.grouped``, issue 16's change 8): each part holds keys of the key
group its index entry names, as one or more such pickles one after the other (``frames``), the keys
hashed in batches on the writer thread (``key_group_batch``); a restore reads only the parts of the
key groups it owns (``replay_key_groups``) and puts them in as its own tables. Files written before
number their parts in order and are read whole, their keys hashed by the task state manager, onto
either backend. Savepoints stay full, self-contained snapshots.
"""
from __future__ import annotations

import io
import itertools
import operator
import pickle
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from millstream.engine.runtime.key_group_batch import group_keys
from millstream.engine.runtime.state import state_columns, string_columns
from millstream.engine.runtime.state.state_chain import DELTA, MERGE_KEY_GROUPS, Chain, SharedFile, replay_reads

# The key group of each of a list of keys (the backend's ``key_groups_of``: the batch key-group hash).
KeyGroups = Callable[[Sequence[Any]], Any]
# Entries per part of a base or merged file: a reader unpickles, and a compaction pickles, one part per
# hold of the interpreter lock. 50,000 took 24 ms to unpickle on a slow 2-core machine, and a barrier
# arriving meanwhile waited that long; 10,000 about 5 ms.
BASE_CHUNK = 10_000
ABSENT = object()  # a changed key's value where the table no longer held it: the key was deleted


def columns_frame(name: str, keys: list[Any], values: list[Any], absent: bool = True) -> bytes:
    """The frame of ``keys`` and ``values``, a key whose value is ``ABSENT`` deleted: typed columns
    (``state_columns``) where every key and value is a number, else the pickle of ``(name, [key],
    [value], [deleted key])``.
    Two lists, not a dict: building the dict and pickling it cost the writer a third more per key; a
    reader builds it (``frames``). ``absent`` False: the caller knows no value is ``ABSENT``."""
    if absent and any(map(operator.is_, values, itertools.repeat(ABSENT))):
        gone = [k for k, v in zip(keys, values) if v is ABSENT]
        keys = [k for k, v in zip(keys, values) if v is not ABSENT]
        values = [v for v in values if v is not ABSENT]
    else:
        gone = []
    typed = state_columns.columns(name, keys, values, gone)
    if typed is not None:
        return state_columns.encode(typed)
    text = string_columns.encode(name, keys, values, gone)
    if text is not None:
        return text
    return pickle.dumps((name, keys, values, gone), pickle.HIGHEST_PROTOCOL)


def frames(payload: bytes) -> Iterable[tuple[str, Any, list[Any]]]:
    """The ``(state name, {key: value}, [deleted key])`` of the pickles of a part: one, or (a grouped
    delta's part) a key group's pickles one after the other. A delta writer's pickle is a columns
    frame, ``(name, [key], [value], [deleted key])`` (``columns_frame``), read here as the same triple."""
    for frame in _raw_frames(payload):
        if state_columns.is_columns(frame):
            yield state_columns.decode(frame).as_dict()
        else:
            yield _triple(frame)


def _raw_frames(payload: bytes, text: bool = False) -> Iterator[tuple[Any, ...]]:
    """The frames of a part as unpickled, a text-columns frame as the ``(name, [key], [value], [deleted
    key])`` it stands for (``text``: as unpickled too, for a ``_Slot`` to hold as arrays)."""
    buf = io.BytesIO(payload)
    end = len(payload)
    while buf.tell() < end:
        frame = pickle.load(buf)
        yield string_columns.decode(frame) if not text and string_columns.is_frame(frame) else frame


def _triple(frame: tuple[Any, ...]) -> tuple[str, Any, list[Any]]:
    """A pickled frame (not columns) as ``(name, {key: value}, [deleted key])``."""
    if len(frame) == 4:
        name, keys, values, gone = frame
        return name, dict(zip(keys, values)), gone
    return frame  # type: ignore[return-value]


class Parts(list):
    """The parts [(key group or sequence number, payload)] of one file, how many entries (values and
    deletions) they hold, which the chain's compaction policy weighs (``state_chain.merge_start``),
    and whether they are ``grouped``: each part holds keys of the key group it is listed under, so a
    restore reads only the parts of its own key groups (``SharedFile.grouped``)."""

    def __init__(self, parts: Iterable[tuple[int, bytes]] = (), entries: int = -1, grouped: bool = False) -> None:
        super().__init__(parts)
        self.entries = entries
        self.grouped = grouped


def base_parts(
    tables: Mapping[str, dict[Any, Any]], gone: Mapping[str, set[Any]] | None = None, key_groups: KeyGroups | None = None
) -> Parts:
    """Every table in parts of ``BASE_CHUNK`` entries (in the forked child, or compacting on the writer
    thread): a reader unpickles, and a compaction pickles, one part per hold of the interpreter lock.
    ``gone``: keys deleted, per table (a merge of deltas that does not start the chain keeps them).
    With ``key_groups`` each part holds one key group's entries (``Parts.grouped``)."""
    parts: list[tuple[int, bytes]] = []
    entries = 0
    gone = gone or {}
    seq = itertools.count()
    for name in {**dict.fromkeys(tables), **dict.fromkeys(gone)}:
        table = tables.get(name) or {}
        deleted = list(gone.get(name) or ())
        entries += len(table) + len(deleted)
        if key_groups is None:
            items = iter(dict.items(table))
            while True:
                chunk = dict(itertools.islice(items, BASE_CHUNK))
                if not chunk:
                    break
                parts.append((next(seq), pickle.dumps((name, chunk, []), pickle.HIGHEST_PROTOCOL)))
            for lo in range(0, len(deleted), BASE_CHUNK):
                parts.append((next(seq), pickle.dumps((name, {}, deleted[lo : lo + BASE_CHUNK]), pickle.HIGHEST_PROTOCOL)))
            continue
        parts.extend(_grouped_parts(name, table, deleted, key_groups))
    return Parts(parts, entries, key_groups is not None)


def _grouped_parts(name: str, table: dict[Any, Any], deleted: list[Any], key_groups: KeyGroups) -> list[tuple[int, bytes]]:
    """One table's entries and deleted keys as parts of one key group each, at most BASE_CHUNK entries."""
    out: list[tuple[int, bytes]] = []
    keys = list(dict.keys(table))
    ordered, runs = group_keys(keys, key_groups(keys))
    del keys
    value = dict.__getitem__.__get__(table)
    for kg, lo, hi in runs:
        for start in range(lo, hi, BASE_CHUNK):
            piece = ordered[start : min(hi, start + BASE_CHUNK)]
            out.append((kg, columns_frame(name, piece, list(map(value, piece)), False)))
    if deleted:
        ordered, runs = group_keys(deleted, key_groups(deleted))
        for kg, lo, hi in runs:
            for start in range(lo, hi, BASE_CHUNK):
                out.append((kg, pickle.dumps((name, {}, ordered[start : min(hi, start + BASE_CHUNK)]), pickle.HIGHEST_PROTOCOL)))
    return out


ReadFile = Callable[[str, list[tuple[int, int, int]]], Iterable[tuple[int, bytes]]]


def compact(chain: Chain, read_file: ReadFile, key_groups: KeyGroups | None = None) -> Parts:
    """The parts of one base holding the state of ``chain`` (FLIP-158's materialisation), read from the
    chain's files rather than from the live tables: on the writer thread, nothing forked, nothing the
    task thread changes is touched. Each part read or written is one short hold of the lock."""
    return merge(chain, read_file, True, key_groups)


def merge(files: Chain, read_file: ReadFile, base: bool, key_groups: KeyGroups | None = None) -> Parts:
    """The parts of one file equivalent to ``files`` (consecutive files of a chain) replayed in order.
    ``base``: they start the chain, so deletions are applied and dropped; otherwise the merged file
    is a delta and keeps them (a key deleted here may have a value in an earlier file).

    With ``key_groups`` the merged file is grouped. When every file is grouped already the merge goes
    a few key groups at a time (``MERGE_KEY_GROUPS``), reading only their parts of each file and
    hashing nothing; a chain with a file in the older format is replayed whole and then grouped."""
    if not base and any(f.partial for f in files):
        # a key group's partial base drops its earlier parts, which a delta merged from here cannot say
        raise ValueError("a merge of files with partial bases must start the chain")
    if key_groups is not None and files and all(f.grouped for f in files):
        present = sorted({r[0] for f in files for r in f.index})
        parts: list[tuple[int, bytes]] = []
        entries = 0
        for i in range(0, len(present), MERGE_KEY_GROUPS):
            slots = _replay_grouped(files, read_file, base, frozenset(present[i : i + MERGE_KEY_GROUPS]))
            entries += _replayed_parts(slots, parts)
            del slots
        return Parts(parts, entries, True)
    tables, gone = _replay(files, read_file, base)
    return base_parts({n: t for n, t in tables.items() if t}, None if base else gone, key_groups)


def _replayed_parts(slots: dict[tuple[int, str], "_Slot"], parts: list[tuple[int, bytes]]) -> int:
    """Append a grouped replay's entries to ``parts`` as a key group's parts of at most ``BASE_CHUNK``
    entries each, in key-group order; returns how many entries (values and deletions)."""
    entries = 0
    for (kg, name), slot in sorted(slots.items(), key=operator.itemgetter(0)):
        merged = slot.columns()
        if type(merged) is state_columns.Columns:
            entries += len(merged)
            parts.extend((kg, frame) for frame in state_columns.encode_chunks(merged, BASE_CHUNK))
            continue
        if merged is not None:
            entries += len(merged)
            parts.extend((kg, frame) for frame in string_columns.encode_chunks(merged, BASE_CHUNK))
            continue
        t, g = slot.table or {}, slot.gone
        entries += len(t) + len(g)
        keys, values = list(t), list(t.values())  # no dict per chunk: its lists are what is pickled
        for lo in range(0, len(keys), BASE_CHUNK):
            parts.append((kg, columns_frame(name, keys[lo : lo + BASE_CHUNK], values[lo : lo + BASE_CHUNK], False)))
        del keys, values
        if g:
            parts.append((kg, pickle.dumps((name, {}, list(g)), pickle.HIGHEST_PROTOCOL)))
    return entries


Held = Any  # state_columns.Columns | string_columns.TextColumns


def _held(frame: tuple[Any, ...]) -> Held | None:
    """A frame as arrays a slot can merge without objects: typed columns, or text columns of string keys."""
    if state_columns.is_columns(frame):
        return state_columns.decode(frame)
    if string_columns.is_frame(frame):
        return string_columns.held(frame)
    return None


def _objects(frame: tuple[Any, ...]) -> tuple[Iterable[Any], Iterable[Any], list[Any]]:
    """A frame's (keys, values, deleted keys) as Python objects."""
    if state_columns.is_columns(frame):
        c = state_columns.decode(frame)
        return c.keys.tolist(), c.values(), c.gone.tolist()
    if string_columns.is_frame(frame):
        frame = string_columns.decode(frame)
    if len(frame) == 4:  # a delta writer's (name, [key], [value], [deleted key]): no dict built
        return frame[1], frame[2], frame[3]
    return frame[1].keys(), frame[1].values(), frame[2]  # (name, {key: value}, [deleted key])


def _held_objects(h: Held) -> tuple[Iterable[Any], Iterable[Any], list[Any]]:
    if type(h) is state_columns.Columns:
        return h.keys.tolist(), h.values(), h.gone.tolist()
    _, keys, values, gone = h.objects()
    return keys, values, gone


class _Slot:
    """One key group's entries of one table, replayed frame after frame: held as arrays while every
    frame is columns of one kind and value spec, typed (``state_columns.merge``) or text
    (``string_columns.merge``), which pick each key's newest entry at the end with no Python object
    per entry; else replayed into a dict, as a chain in the older format is."""

    __slots__ = ("base", "held", "spec", "table", "gone")

    def __init__(self, base: bool) -> None:
        self.base = base
        self.held: list[Held] = []
        self.spec: Any = None
        self.table: dict[Any, Any] | None = None  # None while the entries are held as arrays
        self.gone: set[Any] = set()

    def add(self, frame: tuple[Any, ...]) -> None:
        if self.table is None:
            h = _held(frame)
            if h is not None and (not self.held or type(h) is type(self.held[0])) and (h.spec is None or self.spec is None or h.spec == self.spec):
                self.spec = self.spec if h.spec is None else h.spec
                self.held.append(h)
                return
            self._to_table()
        self._apply(*_objects(frame))

    def _to_table(self) -> None:
        self.table = {}
        held, self.held = self.held, []
        for h in held:
            self._apply(*_held_objects(h))

    def _apply(self, keys: Iterable[Any], values: Iterable[Any], dead: list[Any]) -> None:
        t = self.table
        t.update(zip(keys, values))  # type: ignore[union-attr]
        if self.gone:  # a value written after the deletion
            self.gone.difference_update(keys)
        for k in dead:
            t.pop(k, None)  # type: ignore[union-attr]
        if dead and not self.base:
            self.gone.update(dead)

    def columns(self) -> Held | None:
        """The replayed entries as one frame of arrays, if they were held so (typed or text columns);
        None, and the entries replayed into ``table``, if not (or two text keys hashed equal)."""
        if self.table is not None or not self.held:
            return None
        if type(self.held[0]) is state_columns.Columns:
            return state_columns.merge(self.held, self.base)
        merged = string_columns.merge(self.held, self.base)
        if merged is None:
            self._to_table()
        return merged

    def as_table(self) -> tuple[dict[Any, Any], set[Any]]:
        """The replayed entries as a dict, and the keys deleted (kept only where not ``base``)."""
        merged = self.columns()
        if merged is None:
            return self.table or {}, self.gone
        if type(merged) is state_columns.Columns:
            _, table, gone = merged.as_dict()
            return table, set(gone)
        _, keys, values, gone = merged.objects()
        return dict(zip(keys, values)), set(gone)


def _replay_slots(files: Chain, read_file: ReadFile, base: bool, owned: Iterable[int] | None, by_key_group: bool) -> tuple[dict[Any, _Slot], bool]:
    """Replay ``files`` in order, each key group from its newest base on (``replay_reads``), reading of
    grouped files only the parts of key groups ``owned`` (None: all), into a ``_Slot`` per table, or
    per (key group, table) ``by_key_group``. Also returns whether every file read was grouped."""
    slots: dict[Any, _Slot] = {}
    grouped = True
    for _, f, index in replay_reads(files, owned):
        grouped = grouped and f.grouped
        for kg, payload in read_file(f.name, index):
            for frame in _raw_frames(payload, text=True):
                name = frame[1] if state_columns.is_columns(frame) or string_columns.is_frame(frame) else frame[0]
                at = (kg, name) if by_key_group else name
                slot = slots.get(at)
                if slot is None:
                    slot = slots[at] = _Slot(base)
                slot.add(frame)
    return slots, grouped


def _replay_grouped(files: Chain, read_file: ReadFile, base: bool, owned: frozenset[int]) -> dict[tuple[int, str], _Slot]:
    """The parts of key groups ``owned`` of grouped ``files`` replayed, kept apart as {(key group, name): ...}."""
    return _replay_slots(files, read_file, base, owned, True)[0]


def _replay(files: Chain, read_file: ReadFile, base: bool) -> tuple[dict, dict]:
    """Replay ``files`` in order, as {name: {key: value}} and {name: {deleted key}}."""
    slots, _ = _replay_slots(files, read_file, base, None, False)
    replayed = {name: slot.as_table() for name, slot in slots.items()}
    return {n: t for n, (t, _) in replayed.items()}, {n: g for n, (_, g) in replayed.items() if g}


_PENDING = "(the delta being written)"


def rebase(parent: Chain, delta: Parts, read_file: ReadFile, key_groups: Iterable[int]) -> Parts:
    """The parts of a partial base (``SharedFile.partial``) of ``key_groups``: their state after
    ``parent`` and then ``delta`` (the grouped parts of the delta this checkpoint writes, read from
    memory), read from the chain's files on the writer thread as ``merge`` does. A key group with no
    state gets an empty part, which still makes the file its base (a rolled compaction,
    ``rolled_compaction.rolled_due``)."""
    owned = frozenset(key_groups)
    pending = SharedFile(_PENDING, DELTA, 0, tuple((kg, i, len(p)) for i, (kg, p) in enumerate(delta) if kg in owned), grouped=True)

    def read(name: str, index: list[tuple[int, int, int]]) -> Iterable[tuple[int, bytes]]:
        if name == _PENDING:
            return [(kg, delta[i][1]) for kg, i, _ in index]
        return read_file(name, index)

    slots = _replay_grouped((*parent, pending), read, True, owned)
    parts: list[tuple[int, bytes]] = []
    entries = _replayed_parts(slots, parts)
    parts.extend((kg, b"") for kg in owned - {kg for kg, _ in parts})  # key groups left empty
    parts.sort(key=operator.itemgetter(0))  # stable: a key group's parts stay in order
    return Parts(parts, entries, True)


def replay_tables(chain: Chain, read_file: ReadFile) -> dict[str, dict[Any, Any]]:
    """The tables after the chain's base and deltas, in order; ``read_file(name, index)`` reads a file's parts."""
    return replay_key_groups(chain, read_file, None)[0]


def replay_key_groups(chain: Chain, read_file: ReadFile, key_groups: range | None) -> tuple[dict[str, dict[Any, Any]], bool]:
    """As ``replay_tables``, reading of grouped files only the parts of ``key_groups`` (None: all), each
    key group from its newest base on (``replay_reads``). Returns the tables and whether they hold
    those key groups only (every file was grouped); a file in the older format is read whole, and
    then the caller must still sort its keys by key group."""
    slots, grouped = _replay_slots(chain, read_file, True, key_groups, False)
    tables = {name: slot.as_table()[0] for name, slot in slots.items()}
    return {name: t for name, t in tables.items() if t}, key_groups is not None and grouped
