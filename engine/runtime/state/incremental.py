"""Incremental checkpoints of the on-disk keyed backend: its files and their replay.

Millstream's version of RocksDB's incremental checkpoints with FLIP-158's periodic materialisation.
The backend records the LMDB keys it writes back or deletes (``state_chain.ChangeTracker``, which
both backends share with the rest of the chain bookkeeping). A checkpoint then
writes either a *base* (every record) or a *delta*: the records of the keys changed since the last
*completed* checkpoint as they are at the barrier, a deleted key as a tombstone (``None``). Its
state refers to the chain ``[base, delta, ...]``; the files live in the job's ``shared/`` directory
and are reference-counted by the coordinator (``millstream.engine.checkpoint.shared_state_registry``).

A file is one part per key group (``encode_parts``), and its handle lists each part's offset, so a
restore, rescaled or not, reads only the key groups its subtask owns and replays them in chain order:
``replay_into`` a part at a time straight into a backend (issue 16: a restore holds one key group's
records, never a file or the state), ``replay`` into lists, each key group from its newest base.
A writer that can read the chain's files compacts it a few key groups per checkpoint: a partial base
of their live records (``rebase_groups``, ``rolled_compaction``) rather than every record again as a
base; ``merge_groups`` merges a chain's newest deltas into one (as an LSM tree's size-tiered
compaction does) for a plan that asks for it. Everything here is pure: the files are written and
read by the caller (checkpoint storage).
"""
from __future__ import annotations

import io
import operator
import pickle
from dataclasses import replace
from typing import Callable, Container, Iterable, Iterator, Mapping, Sequence

from millstream.engine.runtime.state.state_chain import BASE, MERGE_KEY_GROUPS, Chain, SharedFile, replay_reads
from millstream.engine.runtime.state.state_records import KG_BYTES

Record = tuple[bytes, "bytes | None"]  # (LMDB key, stored record or None: deleted)
_LIVE = operator.itemgetter(1)  # a record that is not a tombstone (a record is a pickle, never b"")


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
    return [(kg, flat_dumps(by_kg[kg])) for kg in sorted(by_kg)]


def flat_dumps(tables: Mapping[str, list[Record]]) -> bytes:
    """A key group's records pickled without pickle's memo. They are bytes in tuples in lists, never
    shared nor cyclic, so the memo (a dict entry and a PUT opcode for every bytes object and tuple)
    bought nothing and was half of the encode: 40-60 ns a record against 83-86, and 8 % fewer bytes
    (issue 16, docs/large-state.md change 31). ``Pickler.fast`` is what turns the memo off; the
    stream is an ordinary pickle, read back by ``pickle.loads``."""
    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.fast = True  # no memo: exact for data with no object referred to twice
    pickler.dump(tables if type(tables) is dict else dict(tables))
    return out.getvalue()


def encode_groups(groups: Iterable[tuple[int, Mapping[str, list[Record]]]]) -> Iterator[tuple[int, bytes]]:
    """``encode_parts``'s parts from records already grouped by key group (the on-disk backend's
    ``begin_incremental_snapshot_parts``), pickled one at a time as they are drawn."""
    for kg, tables in groups:
        yield kg, flat_dumps(tables)


def merge_groups(
    files: Sequence[SharedFile], read_parts: Callable[[str, list[tuple[int, int, int]]], Iterable[tuple[int, bytes]]]
) -> Iterator[tuple[int, dict[str, list[Record]]]]:
    """The records of one delta equivalent to ``files`` (consecutive deltas of a chain, never its
    base) replayed in order, a key group at a time in key-group order as ``encode_groups`` takes
    them: per state, each key's newest record, sorted by LMDB key. Tombstones (None) stay, as a key
    deleted here may have a record in a file before these. ``MERGE_KEY_GROUPS`` key groups are read
    from every file at a time, so a merge never holds the files whole."""
    if any(f.partial for f in files):
        # a key group's partial base drops its earlier parts, which a merged delta cannot say
        raise ValueError("files with partial bases are compacted by key group, not merged")
    present = sorted({r[0] for f in files for r in f.index})
    for lo in range(0, len(present), MERGE_KEY_GROUPS):
        merged = _laid_over(tuple(files), frozenset(present[lo : lo + MERGE_KEY_GROUPS]), read_parts)
        for kg in sorted(merged):
            yield kg, {name: sorted(records.items()) for name, records in merged[kg].items()}


def _laid_over(
    files: Chain, key_groups: Container[int], read_parts: Callable[[str, list[tuple[int, int, int]]], Iterable[tuple[int, bytes]]]
) -> dict[int, dict[str, dict[bytes, bytes | None]]]:
    """{key group: {state name: {LMDB key: record or None}}} of ``key_groups``, the parts of ``files``
    laid over each other in order, each key group from its newest base on (``replay_reads``): a
    base's records are where it starts, a delta's overwrite."""
    merged: dict[int, dict[str, dict[bytes, bytes | None]]] = {}
    for _, f, ranges in replay_reads(grouped(files), key_groups):
        for kg, payload in read_parts(f.name, ranges):
            part: dict[str, list[Record]] = pickle.loads(payload)
            tables = merged.setdefault(kg, {})
            for name, rows in part.items():
                tables.setdefault(name, {}).update(rows)
    return merged


def grouped(chain: Iterable[SharedFile]) -> Chain:
    """``chain`` with every file marked ``grouped``: this backend's files always hold a part per key
    group, also those written before the flag was (a replay then reads only the key groups asked for)."""
    return tuple(f if f.grouped else replace(f, grouped=True) for f in chain)


def rebase_groups(
    parent: Chain,
    delta: Mapping[int, Mapping[str, list[Record]]],
    read_parts: Callable[[str, list[tuple[int, int, int]]], Iterable[tuple[int, bytes]]],
    key_groups: Sequence[int],
) -> Iterator[tuple[int, dict[str, list[Record]]]]:
    """A partial base of ``key_groups`` (``rolled_compaction``): their live records after ``parent`` and
    then ``delta`` (this checkpoint's records by key group, in memory), a key group at a time in
    key-group order as ``encode_groups`` takes them; a key group with no records still gets a part
    (an empty one), which makes the file its base. ``MERGE_KEY_GROUPS`` key groups read at a time."""
    ordered = sorted(key_groups)
    for lo in range(0, len(ordered), MERGE_KEY_GROUPS):
        some = ordered[lo : lo + MERGE_KEY_GROUPS]
        merged = _laid_over(parent, frozenset(some), read_parts)
        for kg in some:
            tables = merged.get(kg, {})
            for name, rows in (delta.get(kg) or {}).items():
                tables.setdefault(name, {}).update(rows)
            # Live records in the order laid over, not sorted: a restore puts a key group's records back in
            # any order, and sorting bytes (plus a generator step per record) was most of a rebase's time.
            # ``filter`` drops the tombstones (None) in C; a stored record is never empty.
            yield kg, {name: list(filter(_LIVE, records.items())) for name, records in tables.items()}


def replay(
    chain: Chain, key_groups: range, read_parts: Callable[[str, list[tuple[int, int, int]]], list[tuple[int, bytes]]]
) -> dict[str, list[tuple[bytes, bytes]]]:
    """The state of ``key_groups`` after base and deltas, in order: {state name: [(LMDB key, record)]}
    sorted by key. Only the parts of those key groups are read (``read_parts(name, ranges)``)."""
    merged = _laid_over(chain, key_groups, read_parts)
    out: dict[str, list[tuple[bytes, bytes]]] = {}
    for kg in sorted(merged):
        for name, records in merged[kg].items():
            live = [(lk, vb) for lk, vb in records.items() if vb is not None]
            live.sort()
            out.setdefault(name, []).extend(live)
    return out


def replay_into(
    chain: Sequence[SharedFile],
    key_groups: range,
    read_parts: Callable[[str, list[tuple[int, int, int]]], Iterable[tuple[int, bytes]]],
    put: Callable[[str, list[Record], bool], None],
) -> None:
    """Replay the parts of ``key_groups`` of ``chain`` in order, one part at a time, as
    ``put(state name, records, is_delta)``: a base's records are values, a delta's are values or
    None (deleted), to be applied over what came before. Each key group is replayed from its newest
    base, whole or partial (``state_chain.replay_reads``). ``read_parts(name, ranges)`` may be
    a generator: a part is dropped before the next is drawn, so what is in memory is one part's
    records and what the reader reads ahead."""
    for _, f, ranges in replay_reads(grouped(chain), key_groups):
        delta = f.kind != BASE  # a base (whole or of these key groups) is where they start
        for _kg, payload in read_parts(f.name, ranges):
            part: dict[str, list[Record]] = pickle.loads(payload)
            del payload
            for name, rows in part.items():
                put(name, rows, delta)
            del part
