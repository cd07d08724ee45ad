"""The on-disk backend's restores read state files a part at a time (issue 16): restoring a full
checkpoint, or replaying an incremental chain (a base and deltas), takes Python memory far below the
state's size, reads only the byte ranges of the key groups the subtask owns, and gives back exactly
the state that was checkpointed, at the same parallelism and after a rescale 2 -> 3 and 3 -> 2.

The files are written by the real writers (``write_task_state_parts``, ``snapshot_keyed_incremental``
with ``write_shared_file``) and read by the task's real restore path (``stream_task._read_state_into``,
``restore_keyed`` with ``iter_shared_parts``). ``tracemalloc`` follows every thread.
"""
from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from tests.engine.runtime.state.test_streamed_snapshot import _peak  # tracemalloc peak of one call
from millstream.engine.checkpoint import storage as storage_module
from millstream.engine.checkpoint.filesystem import LocalFileSystem
from millstream.engine.checkpoint.rescale import OperatorRestore
from millstream.engine.checkpoint.shared_state_registry import SHARED_DIR
from millstream.engine.checkpoint.state_origin import StateOrigin
from millstream.engine.checkpoint.storage import METADATA_FILE, FileSystemCheckpointStorage, iter_shared_parts, write_shared_file
from millstream.engine.runtime.key_groups import KEY_ENCODING_VERSION, assign_to_key_group, key_group_range
from millstream.engine.runtime.state.key_grouped_state import encode_state_parts
from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
from millstream.engine.runtime.state.state_chain import SharedFile
from millstream.engine.runtime.state.state_records import RECORD_KEYS_FIELD, RECORD_KEYS_VERSION, encode_key, key_group_prefix
from millstream.engine.runtime.state.task_state_manager import KEY_ENCODING_FIELD, restore_keyed, snapshot_keyed_incremental
from millstream.engine.runtime.stream_task import _read_state_into
from tests.engine.runtime.state.test_properties_snapshots import _Operator

JOB = "ef" * 16
SECRET = "r" * 32
MAX_P = 128
KEYS = 300_000
VALUE = b"v" * 100  # ~35 MB of records on disk, several times that as Python lists
KINDS = {
    "counts": "value", "other": "value",
    KEY_ENCODING_FIELD: str(KEY_ENCODING_VERSION), RECORD_KEYS_FIELD: str(RECORD_KEYS_VERSION),
}


def _record(key: str, value: Any) -> tuple[bytes, bytes]:
    """The raw record the on-disk backend stores for a str key (``lmdb_backend._encode``)."""
    return key_group_prefix(assign_to_key_group(key, MAX_P)) + encode_key(key), pickle.dumps(value, 5)


def _state(keys: int) -> dict[str, dict[bytes, bytes]]:
    """{table: {LMDB key: record}}: two tables sharing every key group."""
    out: dict[str, dict[bytes, bytes]] = {"counts": {}, "other": {}}
    for i in range(keys):
        lk, vb = _record(f"k{i}", VALUE)
        out["counts" if i % 2 else "other"][lk] = vb
    return out


def _backend(path: Path, state: dict[str, dict[bytes, bytes]], key_groups: range, incremental: bool = False) -> LmdbKeyedStateBackend:
    backend = LmdbKeyedStateBackend(MAX_P, path, incremental=incremental)
    for name, records in state.items():
        rows = sorted((lk, vb) for lk, vb in records.items() if int.from_bytes(lk[:2], "big") in key_groups)
        backend.restore_records(name, "value", rows)
    return backend


def _contents(backend: LmdbKeyedStateBackend) -> dict[str, dict[bytes, bytes]]:
    return {name: dict(rows) for name, rows in backend.begin_snapshot()().items() if rows}


def _owned(state: dict[str, dict[bytes, bytes]], key_groups: range) -> dict[str, dict[bytes, bytes]]:
    out = {name: {lk: vb for lk, vb in records.items() if int.from_bytes(lk[:2], "big") in key_groups} for name, records in state.items()}
    return {name: records for name, records in out.items() if records}


def _write_full(backend: LmdbKeyedStateBackend, location: Path, subtask: int) -> str:
    """A full checkpoint's state file of ``backend``, written as the task's writer thread does."""
    storage = FileSystemCheckpointStorage(str(location))

    def consume(groups: Any) -> tuple[str, int]:
        payload, parts = encode_state_parts({"operator": [subtask], "kinds": KINDS, "keyed": {}}, groups)
        return storage.write_task_state_parts(JOB, 1, ("v", subtask), "op", payload, parts, location=str(location))

    handle, _ = backend.begin_snapshot_parts()(consume)
    return handle


def _restore_full(backend: LmdbKeyedStateBackend, handles: dict[int, str], subtask: int, parallelism: int, old: int) -> None:
    """What ``StreamTask._restore`` does for the keyed head of an on-disk backend."""
    spec = OperatorRestore("op", subtask, parallelism, old, MAX_P, handles)
    origin = StateOrigin(JOB, 1)
    loaded = {i: _read_state_into(h, origin, spec.key_groups, backend) for i, h in handles.items()}
    restore_keyed(backend, _Operator(), loaded, spec)


@pytest.fixture
def bytes_read(monkeypatch) -> dict[str, int]:
    """Bytes read per file by range reads; a whole-file read counts as reading it all."""
    counts: dict[str, int] = {}
    real_ranges, real_read = LocalFileSystem.read_ranges, LocalFileSystem.read

    def read_ranges(self: Any, path: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        out = real_ranges(self, path, ranges)
        counts[path] = counts.get(path, 0) + sum(len(b) for b in out)
        return out

    def read(self: Any, path: str) -> bytes:
        out = real_read(self, path)
        counts[path] = counts.get(path, 0) + len(out)
        return out

    monkeypatch.setattr(LocalFileSystem, "read_ranges", read_ranges)
    monkeypatch.setattr(LocalFileSystem, "read", read)
    return counts


@pytest.mark.parametrize("sealed", [False, True])
def test_a_full_checkpoint_restores_into_the_on_disk_backend_in_bounded_memory(tmp_path, monkeypatch, sealed) -> None:
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET if sealed else None)
    state = _state(KEYS)
    old = _backend(tmp_path / "old", state, range(MAX_P))
    location = tmp_path / "job" / "chk-1"
    handle = _write_full(old, location, 0)
    old.close()
    (location / METADATA_FILE).write_bytes(b"{}")  # completed: its files may be read
    size = Path(handle).stat().st_size
    assert size > KEYS * len(VALUE)

    backend = LmdbKeyedStateBackend(MAX_P, tmp_path / "new")
    _, peak = _peak(lambda: _restore_full(backend, {0: handle}, 0, 1, 1))
    print(f"full restore of {KEYS} keys ({size} bytes): peak {peak} bytes")
    # the old path held the file twice (read, then rebuilt unsealed), and every record as Python
    # objects: several times the file; streamed, a batch of parts and one key group's records
    assert peak < size / 8, f"peak {peak} bytes restoring a {size}-byte state file"
    assert _contents(backend) == state
    backend.close()


def _chain(tmp_path: Path, state: dict[str, dict[bytes, bytes]], deltas: int, changes: int) -> tuple[dict[str, Any], str, dict]:
    """A base of ``state`` and ``deltas`` deltas, each updating, deleting and adding keys through the
    table API; returns (the last checkpoint's operator state, a handle naming its checkpoint, the state
    it holds: {table: {LMDB key: record}})."""
    backend = _backend(tmp_path / "inc", state, range(MAX_P), incremental=True)
    shared = tmp_path / "job" / SHARED_DIR
    expected = {name: dict(records) for name, records in state.items()}
    names = iter(range(1_000_000))

    def write_file(kind: str, parts: Any) -> SharedFile:
        name = f"op-{next(names)}.{kind}"
        size, index = write_shared_file(str(shared), name, parts, JOB)
        return SharedFile(name, kind, size, tuple(index))

    out = snapshot_keyed_incremental(backend, _Operator(), 1, write_file)()
    backend.notify_checkpoint_complete(1)
    counts, other = backend.table("counts", "value"), backend.table("other", "value")
    fresh = KEYS
    for d in range(deltas):
        for j in range(changes):
            i = 2 * (d * changes + j) + 1  # an odd key: in "counts"
            key = f"k{i}"
            lk, vb = _record(key, b"u%d" % d)
            if j % 4 == 0:
                del counts[key]
                expected["counts"].pop(lk)
            else:
                counts[key] = b"u%d" % d
                expected["counts"][lk] = vb
        for j in range(changes // 10):  # a delta of two tables: each part holds both
            key = f"k{2 * j}"  # an even key: in "other"
            other[key] = b"o%d" % d
            lk, vb = _record(key, b"o%d" % d)
            expected["other"][lk] = vb
        for _ in range(changes // 4):
            key = f"k{fresh}"
            fresh += 1
            counts[key] = b"n"
            lk, vb = _record(key, b"n")
            expected["counts"][lk] = vb
        out = snapshot_keyed_incremental(backend, _Operator(), 2 + d, write_file)()
        backend.notify_checkpoint_complete(2 + d)
    backend.close()
    assert [f["kind"] for f in out["chain"]] == ["base"] + ["delta"] * deltas
    chk = tmp_path / "job" / "chk-1"
    chk.mkdir()
    handle = str(chk / "op.state")
    Path(handle).write_bytes(b"")
    (chk / METADATA_FILE).write_bytes(b"{}")  # completed: its chain may be read
    return out, handle, expected


def _restore_chain(backend: LmdbKeyedStateBackend, state: dict[str, Any], handle: str, subtask: int, parallelism: int) -> None:
    """What ``StreamTask._restore`` does for an on-disk backend's incremental checkpoint."""
    spec = OperatorRestore("op", subtask, parallelism, 1, MAX_P, {0: handle})
    origin = StateOrigin(JOB, 1)
    read = lambda old, name, ranges: iter_shared_parts(handle, name, ranges, origin)  # noqa: E731
    restore_keyed(backend, _Operator(), {0: state}, spec, read_shared=read)


def test_an_incremental_chain_restores_into_the_on_disk_backend_in_bounded_memory(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)
    out, handle, expected = _chain(tmp_path, _state(KEYS), deltas=3, changes=10_000)
    size = sum(f["size"] for f in out["chain"])
    backend = LmdbKeyedStateBackend(MAX_P, tmp_path / "new")
    _, peak = _peak(lambda: _restore_chain(backend, out, handle, 0, 1))
    print(f"chain restore of {KEYS} keys + 3 deltas ({size} bytes): peak {peak} bytes")
    # the old replay merged every key group's records of every file into dicts, then lists: several
    # times the chain; streamed, a batch of parts and one key group's records of one file
    assert peak < size / 8, f"peak {peak} bytes replaying a {size}-byte chain"
    assert _contents(backend) == expected
    backend.close()


def test_a_chain_restored_at_a_new_parallelism_reads_only_the_owned_key_groups(tmp_path, monkeypatch, bytes_read) -> None:
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)
    out, handle, expected = _chain(tmp_path, _state(6_000), deltas=2, changes=400)
    bytes_read.clear()
    got: dict[str, dict[bytes, bytes]] = {}
    for j in range(3):
        backend = LmdbKeyedStateBackend(MAX_P, tmp_path / f"new-{j}")
        _restore_chain(backend, out, handle, j, 3)
        mine = _contents(backend)
        assert mine == _owned(expected, key_group_range(MAX_P, 3, j))
        for name, records in mine.items():
            got.setdefault(name, {}).update(records)
        backend.close()
    assert got == expected
    # each shared file was read once in all: a subtask reads only its own key groups' ranges
    shared = tmp_path / "job" / SHARED_DIR
    for f in out["chain"]:
        assert bytes_read[str(shared / f["name"])] == f["size"]


@pytest.mark.parametrize("old_p,new_p", [(1, 1), (2, 3), (3, 2)])
def test_a_full_checkpoint_restores_the_same_state_at_any_parallelism(tmp_path, monkeypatch, bytes_read, old_p, new_p) -> None:
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)
    state = _state(6_000)
    location = tmp_path / "job" / "chk-1"
    handles = {}
    for i in range(old_p):
        old = _backend(tmp_path / f"old-{i}", state, key_group_range(MAX_P, old_p, i))
        handles[i] = _write_full(old, location, i)
        old.close()
    (location / METADATA_FILE).write_bytes(b"{}")
    bytes_read.clear()
    got: dict[str, dict[bytes, bytes]] = {}
    for j in range(new_p):
        backend = LmdbKeyedStateBackend(MAX_P, tmp_path / f"new-{j}")
        mine_handles = {j: handles[j]} if new_p == old_p else handles
        _restore_full(backend, mine_handles, j, new_p, old_p)
        mine = _contents(backend)
        assert mine == _owned(state, key_group_range(MAX_P, new_p, j))
        for name, records in mine.items():
            got.setdefault(name, {}).update(records)
        backend.close()
    assert got == state
    for i, h in handles.items():
        size = Path(h).stat().st_size
        # every part read once, by the subtask owning its key group; only the heads more than once
        assert size <= bytes_read[h] < size + new_p * 4096, (bytes_read[h], size)
