"""The on-disk backend stores an int key of 64 bits in numeric order (``state_records``, version 2 of
the record keys), and state written before that (ints as pickles, version 1) still restores: each int
is re-encoded on its way back into LMDB, so one int never has two entries, and an incremental chain of
version-1 files is not extended with version-2 deltas."""
from __future__ import annotations

import pickle
import random
from typing import Any

import pytest

from millstream.engine.checkpoint.rescale import OperatorRestore
from millstream.engine.runtime.key_groups import KEY_ENCODING_VERSION
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
from millstream.engine.runtime.state.state_records import (
    INT_KEY,
    KG_BYTES,
    RECORD_KEYS_FIELD,
    RECORD_KEYS_VERSION,
    decode_key,
    decode_record,
    encode_key,
    upgrade_keys,
)
from millstream.engine.runtime.state.task_state_manager import KEY_ENCODING_FIELD, _chain_fits, restore_keyed
from tests.engine.runtime.state.test_properties_snapshots import _Operator

MAX_P = 128
EDGES = [0, 1, -1, 255, 256, 65_535, 65_536, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, -(2**63)]
WIDE = [2**63, -(2**63) - 1, 2**100]  # beyond 64 bits: kept as pickles


def test_ints_of_64_bits_encode_in_numeric_order_and_decode_back() -> None:
    rnd = random.Random(7)
    ints = EDGES + [rnd.randrange(-(2**63), 2**63) for _ in range(2_000)] + [rnd.randrange(-1000, 1000) for _ in range(500)]
    for k in ints:
        body = encode_key(k)
        assert body[:1] == INT_KEY and len(body) == 9
        assert decode_key(body) == k and type(decode_key(body)) is int
    assert sorted(set(ints), key=encode_key) == sorted(set(ints))
    for k in WIDE:
        assert encode_key(k) == pickle.dumps(k, 5) and decode_key(encode_key(k)) == k
    for k in ["i", "", "ab", b"i\x00", 2.5, None]:
        assert encode_key(k) == pickle.dumps(k, 5) and decode_key(encode_key(k)) == k


def test_upgrade_re_encodes_pickled_ints_and_nothing_else() -> None:
    prefix = (7).to_bytes(KG_BYTES, "big")
    others = ["s", "a longer string key", b"raw", 2.0, 2.5, None, 2**63, 2**100]
    rows = [(prefix + pickle.dumps(k, 5), b"v") for k in EDGES + others]
    rows.append((prefix + b"~packed", b"K..."))
    rows.append((prefix + b"#" + b"d" * 32, b"K..."))
    up = upgrade_keys(rows)
    assert [lk for lk, _ in up[: len(EDGES)]] == [prefix + encode_key(k) for k in EDGES]
    assert up[len(EDGES) :] == rows[len(EDGES) :]
    assert [vb for _, vb in up] == [vb for _, vb in rows]
    # a delta's deletion (no record) is re-keyed too
    assert upgrade_keys([(prefix + pickle.dumps(300, 5), None)]) == [(prefix + encode_key(300), None)]


def _filled(tmp_path: Any, name: str) -> LmdbKeyedStateBackend:
    backend = LmdbKeyedStateBackend(MAX_P, tmp_path / name, cache_entries=16)
    table = backend.table("counts", "value")
    for k in list(range(-50, 2_000)) + EDGES + WIDE + ["a", "b"]:
        backend.current_key = k
        table[k] = 1
    backend.current_key = (1, "t")
    table[(1, "t")] = 1
    return backend


def _as_version_1(records: dict[str, list[tuple[bytes, bytes]]]) -> dict[str, list[tuple[bytes, bytes]]]:
    """The records as the backend wrote them before version 2: ints as their pickle."""
    out = {}
    for name, rows in records.items():
        old = [(lk[:KG_BYTES] + pickle.dumps(decode_key(lk[KG_BYTES:]), 5) if lk[KG_BYTES : KG_BYTES + 1] == INT_KEY else lk, vb) for lk, vb in rows]
        out[name] = sorted(old)
    return out


def test_the_backend_keeps_the_ints_of_a_key_group_in_numeric_order(tmp_path) -> None:
    backend = _filled(tmp_path, "a")
    rows = backend.begin_snapshot()()["counts"]
    by_group: dict[bytes, list[int]] = {}
    for lk, _ in rows:
        if lk[KG_BYTES : KG_BYTES + 1] == INT_KEY:
            by_group.setdefault(lk[:KG_BYTES], []).append(decode_key(lk[KG_BYTES:]))
    assert sum(map(len, by_group.values())) == len(set(range(-50, 2_000)) | set(EDGES))
    for ints in by_group.values():
        assert ints == sorted(ints)
    backend.close()


@pytest.mark.parametrize("version", [1, RECORD_KEYS_VERSION])
def test_records_of_either_version_restore_into_the_on_disk_backend_with_one_entry_per_key(tmp_path, version) -> None:
    old = _filled(tmp_path, "old")
    records = old.begin_snapshot()()
    expected = dict(old.table("counts", "value").items())
    old.close()
    kinds = {"counts": "value", KEY_ENCODING_FIELD: str(KEY_ENCODING_VERSION)}
    if version == 1:
        records = _as_version_1(records)
        assert not any(lk[KG_BYTES : KG_BYTES + 1] == INT_KEY for lk, _ in records["counts"])
    else:
        kinds[RECORD_KEYS_FIELD] = str(version)
    new = LmdbKeyedStateBackend(MAX_P, tmp_path / "new", cache_entries=16)
    restore_keyed(new, _Operator(), {0: {"keyed": {}, "kinds": kinds, "records": records}}, OperatorRestore("op", 0, 1, 1, MAX_P, {0: None}))
    table = new.table("counts", "value")
    for k in expected:  # the job goes on: every key counted once more, through the key the job uses
        new.current_key = k
        table[k] = table.get(k, 0) + 1
    new.current_key = True  # equal to 1: the same entry, as in a dict
    table[True] = table[True] + 1
    after = new.begin_snapshot()()["counts"]
    assert len(after) == len(expected)  # a pickled int left as it was would now be there twice
    got = dict(decode_record(lk, vb) for lk, vb in after)
    assert got == {k: 3 if k == 1 else 2 for k in expected}
    new.close()


def test_records_of_either_version_restore_into_the_heap_backend(tmp_path) -> None:
    old = _filled(tmp_path, "old")
    records = old.begin_snapshot()()
    expected = dict(old.table("counts", "value").items())
    old.close()
    for recs in (records, _as_version_1(records)):
        heap = HeapKeyedStateBackend(MAX_P)
        restore_keyed(heap, _Operator(), {0: {"keyed": {}, "kinds": {"counts": "value"}, "records": recs}}, OperatorRestore("op", 0, 1, 1, MAX_P, {0: None}))
        assert dict(heap.table("counts", "value").items()) == expected


def test_a_chain_of_version_1_files_is_not_extended(tmp_path) -> None:
    backend = LmdbKeyedStateBackend(MAX_P, tmp_path / "b", incremental=True)
    current = {0: {"chain": object(), "kinds": {RECORD_KEYS_FIELD: str(RECORD_KEYS_VERSION)}}}
    assert _chain_fits(backend, None, current)
    assert not _chain_fits(backend, None, {0: {"chain": object(), "kinds": {"counts": "value"}}})
    assert _chain_fits(HeapKeyedStateBackend(MAX_P), None, {0: {"heap_chain": object(), "kinds": {}}})  # heap chains hold keys, not records
    backend.close()


def test_a_version_1_state_file_restores_part_by_part_with_one_entry_per_key(tmp_path, monkeypatch) -> None:
    """The task's streamed restore of a full checkpoint (``stream_task._read_state_into``) reads the
    version from the file's head before its parts."""
    from millstream.engine.checkpoint.state_origin import StateOrigin
    from millstream.engine.checkpoint.storage import METADATA_FILE, FileSystemCheckpointStorage
    from millstream.engine.runtime.state.key_grouped_state import encode_state_parts
    from millstream.engine.runtime.stream_task import _read_state_into

    from millstream.engine.checkpoint import storage as storage_module

    monkeypatch.setitem(storage_module._sealing, "secret", None)
    source = _filled(tmp_path, "source")
    expected = dict(source.table("counts", "value").items())
    legacy = _as_version_1(source.begin_snapshot()())
    source.close()
    old = LmdbKeyedStateBackend(MAX_P, tmp_path / "old")  # an old backend: its LMDB holds ints as pickles
    old.restore_records("counts", "value", legacy["counts"])
    location = tmp_path / "job" / "chk-1"
    storage = FileSystemCheckpointStorage(str(location))
    kinds = {"counts": "value", KEY_ENCODING_FIELD: str(KEY_ENCODING_VERSION)}  # written before RECORD_KEYS_FIELD

    def consume(groups: Any) -> tuple[str, int]:
        payload, parts = encode_state_parts({"operator": [0], "kinds": kinds, "keyed": {}}, groups)
        return storage.write_task_state_parts("ab" * 16, 1, ("v", 0), "op", payload, parts, location=str(location))

    handle, _ = old.begin_snapshot_parts()(consume)
    old.close()
    (location / METADATA_FILE).write_bytes(b"{}")  # completed: its files may be read
    new = LmdbKeyedStateBackend(MAX_P, tmp_path / "new", cache_entries=16)
    spec = OperatorRestore("op", 0, 1, 1, MAX_P, {0: handle})
    loaded = {0: _read_state_into(handle, StateOrigin("ab" * 16, 1), spec.key_groups, new)}
    restore_keyed(new, _Operator(), loaded, spec)
    table = new.table("counts", "value")
    for k in expected:
        new.current_key = k
        table[k] = table[k] + 1
    after = new.begin_snapshot()()["counts"]
    assert len(after) == len(expected)
    assert dict(decode_record(lk, vb) for lk, vb in after) == {k: 2 for k in expected}
    new.close()
