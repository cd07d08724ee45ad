"""The on-disk backend stores an int key of 64 bits in numeric order (``state_records``, version 2 of
the record keys) and a str as its UTF-8 (version 3), and state written before that (ints and strs as
pickles, version 1; strs as pickles, version 2) still restores: each key is re-encoded on its way back
into LMDB, so one key never has two entries, and an incremental chain of older files is not extended
with newer deltas. A str too long for an LMDB key has the same digest in every version."""
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
    STR_KEY,
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
STRS = ["i", "", "ab", "s", "ünïcödé ☃", "x" * 300]
# LMDB keys are at most 511 bytes: the text of these fits, their pickle (n + 18 bytes) does not, so they
# are kept as the digest of their pickle, as before version 3 (the threshold and the hash unchanged).
LONG = ["L" * 492, "M" * 500, "N" * 508, "O" * 600]


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
    for k in [b"i\x00", b"s", 2.5, None, "\ud800"]:  # a lone surrogate has no UTF-8
        assert encode_key(k) == pickle.dumps(k, 5) and decode_key(encode_key(k)) == k
    for k in STRS:
        assert encode_key(k) == STR_KEY + k.encode() and decode_key(encode_key(k)) == k


@pytest.mark.parametrize("version", [1, 2])
def test_upgrade_re_encodes_pickled_ints_and_strs_and_nothing_else(version) -> None:
    prefix = (7).to_bytes(KG_BYTES, "big")
    others = [b"raw", 2.0, 2.5, None, 2**63, 2**100, "\ud800"]
    ints = EDGES if version == 1 else []  # a version-2 file holds no pickled int of 64 bits
    rows = [(prefix + pickle.dumps(k, 5), b"v") for k in ints + STRS + others]
    rows.append((prefix + b"~packed", b"K..."))
    rows.append((prefix + b"#" + b"d" * 32, b"K..."))
    up = upgrade_keys(rows, version)
    changed = len(ints) + len(STRS)
    assert [lk for lk, _ in up[:changed]] == [prefix + encode_key(k) for k in ints + STRS]
    assert up[changed:] == rows[changed:]
    assert [vb for _, vb in up] == [vb for _, vb in rows]
    # a delta's deletion (no record) is re-keyed too
    assert upgrade_keys([(prefix + pickle.dumps("k", 5), None)], version) == [(prefix + encode_key("k"), None)]
    if version == 2:  # a version-2 int key is already INT_KEY; a pickled one would be wider
        assert upgrade_keys([(prefix + pickle.dumps(2**100, 5), None)], 2) == [(prefix + pickle.dumps(2**100, 5), None)]


def test_a_str_too_long_for_lmdb_keeps_the_digest_of_its_pickle(tmp_path) -> None:
    import hashlib

    backend = LmdbKeyedStateBackend(MAX_P, tmp_path / "d", cache_entries=4)
    for prepared in (False, True):
        for k in LONG + ["P" * 491]:
            if prepared:
                backend.prepare_keys([k, "other"])
            lk, wrapped = backend._encode(k)
            if len(pickle.dumps(k, 5)) + KG_BYTES > 511:
                assert lk[KG_BYTES:] == b"#" + hashlib.blake2b(pickle.dumps(k, 5), digest_size=32).digest() and wrapped
            else:
                assert lk[KG_BYTES:] == STR_KEY + k.encode() and not wrapped
            backend._last_key = None
    backend.close()


def _filled(tmp_path: Any, name: str) -> LmdbKeyedStateBackend:
    backend = LmdbKeyedStateBackend(MAX_P, tmp_path / name, cache_entries=16)
    table = backend.table("counts", "value")
    for k in list(range(-50, 2_000)) + EDGES + WIDE + STRS + LONG + ["\ud800"] + [f"k{i}" for i in range(500)]:
        backend.current_key = k
        table[k] = 1
    backend.current_key = (1, "t")
    table[(1, "t")] = 1
    return backend


def _as_version(records: dict[str, list[tuple[bytes, bytes]]], version: int) -> dict[str, list[tuple[bytes, bytes]]]:
    """The records as the backend wrote them in an older version: strs as their pickle, and in
    version 1 ints too."""
    pickled = {STR_KEY} | ({INT_KEY} if version == 1 else set())
    out = {}
    for name, rows in records.items():
        old = [(lk[:KG_BYTES] + pickle.dumps(decode_key(lk[KG_BYTES:]), 5) if lk[KG_BYTES : KG_BYTES + 1] in pickled else lk, vb) for lk, vb in rows]
        out[name] = sorted(old)
    return out


def _as_version_1(records: dict[str, list[tuple[bytes, bytes]]]) -> dict[str, list[tuple[bytes, bytes]]]:
    return _as_version(records, 1)


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


@pytest.mark.parametrize("version", [1, 2, RECORD_KEYS_VERSION])
def test_records_of_any_version_restore_into_the_on_disk_backend_with_one_entry_per_key(tmp_path, version) -> None:
    old = _filled(tmp_path, "old")
    records = old.begin_snapshot()()
    expected = dict(old.table("counts", "value").items())
    old.close()
    kinds = {"counts": "value", KEY_ENCODING_FIELD: str(KEY_ENCODING_VERSION)}
    if version < RECORD_KEYS_VERSION:
        records = _as_version(records, version)
        assert not any(lk[KG_BYTES : KG_BYTES + 1] in (INT_KEY if version == 1 else STR_KEY, STR_KEY) for lk, _ in records["counts"])
    if version > 1:
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
    assert len(after) == len(expected)  # a pickled int or str left as it was would now be there twice
    got = dict(decode_record(lk, vb) for lk, vb in after)
    assert got == {k: 3 if k == 1 else 2 for k in expected}
    new.close()


def test_records_of_any_version_restore_into_the_heap_backend(tmp_path) -> None:
    old = _filled(tmp_path, "old")
    records = old.begin_snapshot()()
    expected = dict(old.table("counts", "value").items())
    old.close()
    for recs in (records, _as_version(records, 2), _as_version_1(records)):
        heap = HeapKeyedStateBackend(MAX_P)
        restore_keyed(heap, _Operator(), {0: {"keyed": {}, "kinds": {"counts": "value"}, "records": recs}}, OperatorRestore("op", 0, 1, 1, MAX_P, {0: None}))
        assert dict(heap.table("counts", "value").items()) == expected


def test_a_chain_of_version_1_files_is_not_extended(tmp_path) -> None:
    backend = LmdbKeyedStateBackend(MAX_P, tmp_path / "b", incremental=True)
    current = {0: {"chain": object(), "kinds": {RECORD_KEYS_FIELD: str(RECORD_KEYS_VERSION)}}}
    assert _chain_fits(backend, None, current)
    assert not _chain_fits(backend, None, {0: {"chain": object(), "kinds": {"counts": "value"}}})
    assert not _chain_fits(backend, None, {0: {"chain": object(), "kinds": {RECORD_KEYS_FIELD: "2"}}})
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
