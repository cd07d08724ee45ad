"""An operator's state dict as a key-grouped state file (``engine/checkpoint/state_file``): its keyed
state cut into one part per key group, so that a restore reads only the key groups it owns.

What goes into the parts (all of it already grouped by key group when the snapshot is taken):

* ``keyed``: ``{key group: {state name: [(key, value)]}}`` - timers, an operator's own keyed tables,
  and a savepoint's heap tables (grouped in the forked child, see ``snapshot_keyed_tables``);
* ``records``: the on-disk backend's raw records ``{state name: [(LMDB key, record)]}``, sorted by
  LMDB key, which starts with the key group: cut at key-group boundaries by bisection, nothing
  decoded.

Everything else (``kinds``, operator and function state, a source's splits, an incremental chain,
a heap checkpoint's whole ``tables``) stays in the head. An incremental chain goes there compressed
(``CHAINS``): a rolled chain lists ~170-200 files whose names share most of their characters, 19 KB a
subtask in every checkpoint against 2 KB compressed, and at 1 % of 1 M keys per interval a subtask's
delta is about 70 KB. A part is the pickle of ``(pairs, records)``
for its key group. A state with nothing keyed is written as a plain pickle, as before; both formats
are read back by ``decode_state``, which returns the same dict with only the parts that were read,
or ``decode_state_parts``, which hands each part's records on as it is read (issue 16: a restore of
the on-disk backend holds one key group's records, never the file).
"""
from __future__ import annotations

import bisect
import pickle
import zlib
from typing import Any, Callable, Iterable, Iterator, Mapping

from millstream.engine.checkpoint import state_file
from millstream.engine.runtime.state.state_records import KG_BYTES, key_group_prefix

_PROTOCOL = pickle.HIGHEST_PROTOCOL
# In a background snapshot's result (the on-disk backend's), instead of ``records``: the callable
# that hands them to a writer a key group at a time (``begin_snapshot_parts``, ``encode_state_parts``);
# never in a file.
RECORD_GROUPS = "_record_groups"
# In a file's head, instead of ``chain`` and ``heap_chain``: zlib of the pickle of {key: chain}.
CHAINS = "_chains_z"
_CHAIN_KEYS = ("chain", "heap_chain")


def _packed(head: dict[str, Any]) -> dict[str, Any]:
    chains = {k: head[k] for k in _CHAIN_KEYS if head.get(k)}
    if not chains:
        return head
    out = {k: v for k, v in head.items() if k not in chains}
    out[CHAINS] = zlib.compress(pickle.dumps(chains, protocol=_PROTOCOL), 1)
    return out


def _unpacked(state: dict[str, Any]) -> dict[str, Any]:
    packed = state.pop(CHAINS, None)
    if packed is not None:
        chains = pickle.loads(zlib.decompress(packed))
        state.update({k: chains[k] for k in _CHAIN_KEYS if k in chains})
    return state


def encode_state(state: Mapping[str, Any]) -> bytes:
    """The bytes of one operator's state file: key-grouped when it holds keyed state, else a pickle."""
    keyed = state.get("keyed") or {}
    records = state.get("records") or {}
    if not keyed and not any(records.values()):
        return pickle.dumps(_packed(dict(state)), protocol=_PROTOCOL)
    by_kg: dict[int, tuple[dict[str, list], dict[str, list]]] = {}
    for kg, groups in keyed.items():
        by_kg.setdefault(int(kg), ({}, {}))[0].update(groups)
    for name, rows in records.items():
        for kg, lo, hi in key_group_runs(rows):
            by_kg.setdefault(kg, ({}, {}))[1][name] = rows[lo:hi]
    head = _packed({k: v for k, v in state.items() if k not in ("keyed", "records")})
    parts = [(kg, pickle.dumps(by_kg[kg], protocol=_PROTOCOL)) for kg in sorted(by_kg)]
    return state_file.build(pickle.dumps(head, protocol=_PROTOCOL), parts)


def encode_state_parts(
    state: Mapping[str, Any], groups: Iterable[tuple[int, dict[str, list]]]
) -> tuple[bytes, Iterator[tuple[int, bytes]]]:
    """As ``encode_state`` for a state whose ``records`` come as ``groups`` (the on-disk backend's
    ``begin_snapshot_parts``: ``(key group, {state name: records})`` in key-group order) rather than
    whole: (the head's payload, a generator of the parts). The parts are pickled one at a time as
    the generator is drawn, merged with ``keyed``'s key groups, and are those ``encode_state`` makes
    for the same state, so the file reads back the same (``decode_state``)."""
    keyed = {int(kg): groups_ for kg, groups_ in (state.get("keyed") or {}).items()}
    head = _packed({k: v for k, v in state.items() if k not in ("keyed", "records")})

    def parts() -> Iterator[tuple[int, bytes]]:
        pending = sorted(keyed)
        i = 0
        for kg, recs in groups:
            while i < len(pending) and pending[i] < kg:  # timers / own tables of a key group with no records
                yield pending[i], pickle.dumps((keyed[pending[i]], {}), protocol=_PROTOCOL)
                i += 1
            pairs: dict[str, list] = {}
            if i < len(pending) and pending[i] == kg:
                pairs = keyed[kg]
                i += 1
            yield kg, pickle.dumps((pairs, recs), protocol=_PROTOCOL)
        for kg in pending[i:]:
            yield kg, pickle.dumps((keyed[kg], {}), protocol=_PROTOCOL)

    return pickle.dumps(head, protocol=_PROTOCOL), parts()


def key_group_runs(rows: list[tuple[bytes, Any]]) -> list[tuple[int, int, int]]:
    """[(key group, start, end)] of records sorted by LMDB key: one bisection per key group present."""
    out = []
    start, n = 0, len(rows)
    while start < n:
        kg = int.from_bytes(rows[start][0][:KG_BYTES], "big")
        end = bisect.bisect_left(rows, (key_group_prefix(kg + 1),), start) if kg + 1 < 1 << (8 * KG_BYTES) else n
        out.append((kg, start, end))
        start = end
    return out


def decode_state(data: bytes) -> dict[str, Any]:
    """The state dict of a state file's (unsealed) bytes, in either format: ``keyed`` and ``records``
    hold the key groups whose parts are in ``data`` (all of them, or those a partial read kept)."""
    if not state_file.is_key_grouped(data):
        return _unpacked(pickle.loads(data))
    payload, index, body = state_file.split(data)
    state = _unpacked(pickle.loads(payload))
    keyed: dict[int, dict[str, list]] = {}
    records: dict[str, list] = {}
    for kg, off, length in index:  # in key-group order, so each table's records stay sorted
        pairs, recs = pickle.loads(body[off : off + length])
        if pairs:
            keyed[kg] = pairs
        for name, rows in recs.items():
            records.setdefault(name, []).extend(rows)
    state["keyed"] = keyed
    if records:
        state["records"] = records
    return state


def decode_state_parts(
    payload: bytes, parts: Iterable[tuple[int, bytes]], put: Callable[[Mapping[str, Any], str, list], None]
) -> dict[str, Any]:
    """As ``decode_state`` for a key-grouped file read as its head's payload and its (unsealed)
    parts, e.g. the generator of ``read_state_file_parts``: the records of each part are handed to
    ``put(head state, state name, records)`` as the part is read, and are not in the result; a part is
    dropped before the next is drawn."""
    state = _unpacked(pickle.loads(payload))
    keyed: dict[int, dict[str, list]] = {}
    for kg, data in parts:
        pairs, recs = pickle.loads(data)
        del data
        if pairs:
            keyed[kg] = pairs
        for name, rows in recs.items():
            put(state, name, rows)
        del recs
    state["keyed"] = keyed
    return state
