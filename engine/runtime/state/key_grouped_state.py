"""An operator's state dict as a key-grouped state file (``engine/checkpoint/state_file``): its keyed
state cut into one part per key group, so that a restore reads only the key groups it owns.

What goes into the parts (all of it already grouped by key group when the snapshot is taken):

* ``keyed``: ``{key group: {state name: [(key, value)]}}`` - timers, an operator's own keyed tables,
  and a savepoint's heap tables (grouped in the forked child, see ``snapshot_keyed_tables``);
* ``records``: the on-disk backend's raw records ``{state name: [(LMDB key, record)]}``, sorted by
  LMDB key, which starts with the key group: cut at key-group boundaries by bisection, nothing
  decoded.

Everything else (``kinds``, operator and function state, a source's splits, an incremental chain,
a heap checkpoint's whole ``tables``) stays in the head. A part is the pickle of ``(pairs, records)``
for its key group. A state with nothing keyed is written as a plain pickle, as before; both formats
are read back by ``decode_state``, which returns the same dict with only the parts that were read.
"""
from __future__ import annotations

import bisect
import pickle
from typing import Any, Mapping

from millstream.engine.checkpoint import state_file
from millstream.engine.runtime.state.state_records import KG_BYTES, key_group_prefix

_PROTOCOL = pickle.HIGHEST_PROTOCOL


def encode_state(state: Mapping[str, Any]) -> bytes:
    """The bytes of one operator's state file: key-grouped when it holds keyed state, else a pickle."""
    keyed = state.get("keyed") or {}
    records = state.get("records") or {}
    if not keyed and not any(records.values()):
        return pickle.dumps(dict(state), protocol=_PROTOCOL)
    by_kg: dict[int, tuple[dict[str, list], dict[str, list]]] = {}
    for kg, groups in keyed.items():
        by_kg.setdefault(int(kg), ({}, {}))[0].update(groups)
    for name, rows in records.items():
        for kg, lo, hi in key_group_runs(rows):
            by_kg.setdefault(kg, ({}, {}))[1][name] = rows[lo:hi]
    head = {k: v for k, v in state.items() if k not in ("keyed", "records")}
    parts = [(kg, pickle.dumps(by_kg[kg], protocol=_PROTOCOL)) for kg in sorted(by_kg)]
    return state_file.build(pickle.dumps(head, protocol=_PROTOCOL), parts)


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
        return pickle.loads(data)
    payload, index, body = state_file.split(data)
    state = pickle.loads(payload)
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
