"""The on-disk backend's snapshots are written a key group at a time (issue 16): the Python memory a
checkpoint of many keys takes stays far below the state's size, and the file reads back whole.

Each test fills a real LMDB backend with raw records (``restore_records``, the restore path) and
snapshots it by the task's real path: a full checkpoint through ``SubtaskCheckpointer`` with the
stream task's background snapshot, an incremental base through ``snapshot_keyed_incremental``
writing a shared file. ``tracemalloc`` follows every thread, the writer's included.
"""
from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from millstream.engine.checkpoint import storage as storage_module
from millstream.engine.checkpoint.shared_state_registry import SHARED_DIR
from millstream.engine.checkpoint.state_origin import StateOrigin
from millstream.engine.checkpoint.storage import METADATA_FILE, FileSystemCheckpointStorage, read_shared_parts, write_shared_file
from millstream.engine.runtime.checkpointing import Barrier, SubtaskCheckpointer
from millstream.engine.runtime.state.incremental import replay
from millstream.engine.runtime.state.key_grouped_state import decode_state
from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
from millstream.engine.runtime.state.state_chain import SharedFile, chain_from_wire
from millstream.engine.runtime.state.state_records import encode_key, key_group_prefix
from millstream.engine.runtime.state.task_state_manager import snapshot_keyed_incremental
from millstream.engine.runtime.stream_task import _keyed_snapshot_async
from tests.engine.runtime.state.test_properties_snapshots import _Operator

JOB = "cd" * 16
SECRET = "q" * 32
MAX_P = 128
KEYS = 300_000
VALUE = b"v" * 100  # a record of ~110 bytes: the state is ~35 MB on disk, ~75 MB as Python lists


def _rows() -> list[tuple[bytes, bytes]]:
    # sorted by LMDB key (key group first), as restore_records and LMDB keep them
    return sorted((key_group_prefix(i % MAX_P) + b"k%09d" % i, VALUE) for i in range(KEYS))


def _filled(path: Path, incremental: bool = False) -> LmdbKeyedStateBackend:
    backend = LmdbKeyedStateBackend(MAX_P, path, incremental=incremental)
    rows = _rows()
    backend.restore_records("counts", "value", rows[0::2])
    backend.restore_records("other", "value", rows[1::2])  # two tables sharing every key group
    return backend


def _peak(fn: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("sealed", [False, True])
def test_a_full_checkpoint_of_the_on_disk_backend_is_written_in_bounded_memory(tmp_path, monkeypatch, sealed) -> None:
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET if sealed else None)
    backend = _filled(tmp_path / "lmdb")
    acks: list[Any] = []
    declined: list[str] = []
    done = threading.Event()
    checkpointer = SubtaskCheckpointer(
        JOB, "v", 0,
        lambda cid, ack: (acks.append(ack), done.set()),
        lambda cid, why: (declined.append(why), done.set()),
        fork_snapshots=False,
    )
    location = str(tmp_path / "chk-1")
    barrier = Barrier(1, 0, location)

    def checkpoint() -> None:
        background = {"op": _keyed_snapshot_async(backend, _Operator())}
        checkpointer.snapshot(barrier, {"op": {"operator": [1]}}, {}, 0, 0, background=background)
        assert done.wait(120)

    _, peak = _peak(checkpoint)
    assert not declined, declined
    handle = acks[0].state_handles["op"]
    size = Path(handle).stat().st_size
    assert size > KEYS * len(VALUE)
    # the old path held every record as Python objects, then the pickle, then the joined file: several
    # times the state's size; streamed, about one key group and a block of records
    assert peak < size / 5, f"peak {peak} bytes for a {size}-byte state file"
    assert not [p for p in Path(location).iterdir() if p.name.startswith(".")]  # no temp or spool file left
    (Path(location) / METADATA_FILE).write_bytes(b"{}")  # completed: its files may be read

    state = decode_state(FileSystemCheckpointStorage.read_state_file(handle, StateOrigin(JOB, 1)))
    rows = _rows()
    assert state["operator"] == [1]
    assert sorted(state["records"]["counts"] + state["records"]["other"]) == rows
    # a rescaled restore reads only its key groups' parts
    part = decode_state(FileSystemCheckpointStorage.read_state_file_key_groups(handle, range(0, 5), StateOrigin(JOB, 1)))
    assert sorted(part["records"]["counts"] + part["records"]["other"]) == [r for r in rows if r[0][:2] < key_group_prefix(5)]
    backend.close()


def test_an_incremental_base_of_the_on_disk_backend_is_written_in_bounded_memory(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)
    backend = _filled(tmp_path / "lmdb", incremental=True)
    shared = tmp_path / "job" / SHARED_DIR

    def write_file(kind: str, parts: Any) -> SharedFile:
        name = f"op-1.{kind}"
        size, index = write_shared_file(str(shared), name, parts, JOB)
        return SharedFile(name, kind, size, tuple(index))

    out, peak = _peak(lambda: snapshot_keyed_incremental(backend, _Operator(), 1, write_file)())
    (base,) = out["chain"]
    assert base["kind"] == "base"
    size = (shared / base["name"]).stat().st_size
    assert size > KEYS * len(VALUE)
    assert peak < size / 5, f"peak {peak} bytes for a {size}-byte base"

    # restored by the unchanged reader: replay the base's parts of every key group
    chk = tmp_path / "job" / "chk-1"
    chk.mkdir()
    handle = str(chk / "op.state")
    Path(handle).write_bytes(b"")
    (chk / METADATA_FILE).write_bytes(b"{}")  # completed: its chain may be read
    chain = chain_from_wire(out["chain"])
    tables = replay(chain, range(MAX_P), lambda name, ranges: read_shared_parts(handle, name, ranges, StateOrigin(JOB, 1)))
    assert sorted(tables["counts"] + tables["other"]) == _rows()
    backend.close()


def test_an_incremental_delta_of_the_on_disk_backend_is_written_in_bounded_memory(tmp_path, monkeypatch) -> None:
    """A delta of many changed keys is written from the records the change tracker kept (bounded by
    ``max_tracked_bytes``, the tracker's own cost), a key group at a time: the writer adds no
    copy of the changed records (issue 16)."""
    import pickle

    from millstream.engine.runtime.key_groups import assign_to_key_group

    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)
    backend = LmdbKeyedStateBackend(MAX_P, tmp_path / "lmdb", incremental=True)
    keys = [f"k{i}" for i in range(KEYS)]
    rows = sorted((key_group_prefix(assign_to_key_group(k, MAX_P)) + encode_key(k), pickle.dumps(VALUE, 5)) for k in keys)
    backend.restore_records("counts", "value", rows)
    del rows
    shared = tmp_path / "job" / SHARED_DIR
    names = iter(range(100))

    def write_file(kind: str, parts: Any) -> SharedFile:
        name = f"op-{next(names)}.{kind}"
        size, index = write_shared_file(str(shared), name, parts, JOB)
        return SharedFile(name, kind, size, tuple(index))

    snapshot_keyed_incremental(backend, _Operator(), 1, write_file)()
    backend.notify_checkpoint_complete(1)
    counts = backend.table("counts", "value")
    for k in keys[: KEYS * 2 // 3]:
        counts[k] = VALUE[:-1]
    # on the task thread: the plan (the tracker's changed records, its own cost); measured: the
    # writer thread's part, which groups and writes the records
    finish = snapshot_keyed_incremental(backend, _Operator(), 2, write_file)
    out, peak = _peak(finish)
    base, delta = out["chain"]
    assert delta["kind"] == "delta"
    assert delta["size"] > KEYS * 2 // 3 * len(VALUE)
    print(f"delta of {KEYS * 2 // 3} changed keys ({delta['size']} bytes): peak {peak} bytes")
    # a list of every changed record before grouping would cost more than the file
    assert peak < delta["size"] / 5, f"peak {peak} bytes for a {delta['size']}-byte delta"
    backend.close()


def test_a_streamed_state_file_at_a_url_is_spooled_then_uploaded_and_reads_back(monkeypatch) -> None:
    """A remote store (fsspec's in-memory one here) gets the same file, uploaded whole under a
    temporary name and moved; ``write_task_state`` of the same state gives the same bytes."""
    from millstream.engine.checkpoint.filesystem import storage_fs
    from millstream.engine.runtime.state.key_grouped_state import encode_state, encode_state_parts

    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)
    location = "memory://i16stream/job/chk-1"
    storage = FileSystemCheckpointStorage(location)
    rows = {"counts": [(key_group_prefix(kg) + b"k%d" % i, b"v%d" % i) for kg in (1, 4, 9) for i in range(3)]}
    state = {"operator": [7], "keyed": {4: {"_timers/t": [("k", [])]}, 12: {"_timers/t": [("z", [])]}}}
    groups = [(kg, {"counts": [r for r in rows["counts"] if r[0][:2] == key_group_prefix(kg)]}) for kg in (1, 4, 9)]
    payload, parts = encode_state_parts(state, groups)
    handle, size = storage.write_task_state_parts(JOB, 1, ("v", 0), "op", payload, parts, location=location)
    fs = storage_fs(location)
    assert fs.listdir(location) == [fs.basename(handle)]  # nothing temporary left behind
    fs.write_atomic(fs.join(location, METADATA_FILE), b"{}")
    assert size == len(fs.read(handle))
    same = storage.write_task_state(JOB, 1, ("v", 0), "op2", encode_state({**state, "records": rows}), location=location)
    back = decode_state(FileSystemCheckpointStorage.read_state_file(handle, StateOrigin(JOB, 1)))
    assert back == decode_state(FileSystemCheckpointStorage.read_state_file(same, StateOrigin(JOB, 1)))
    assert back["records"] == rows and sorted(back["keyed"]) == [4, 12] and back["operator"] == [7]
    fs.rmtree("memory://i16stream")


def test_a_failed_checkpoint_ends_the_read_transaction_it_never_read(tmp_path) -> None:
    """The records are read only when the file is written; a checkpoint that fails before that (no
    storage here) must still end the LMDB read transaction, or it would pin LMDB's pages."""
    backend = LmdbKeyedStateBackend(MAX_P, tmp_path / "lmdb")
    backend.restore_records("counts", "value", [(key_group_prefix(3) + b"k", VALUE)])
    declined: list[str] = []
    done = threading.Event()
    checkpointer = SubtaskCheckpointer(
        JOB, "v", 0, lambda cid, ack: done.set(), lambda cid, why: (declined.append(why), done.set()), fork_snapshots=False
    )
    background = {"op": _keyed_snapshot_async(backend, _Operator())}
    assert backend._snapshots == 1
    checkpointer.snapshot(Barrier(1, 0, None), {"op": {"operator": [1]}}, {}, 0, 0, background=background)
    assert done.wait(30) and declined
    assert backend._snapshots == 0
    backend.close()
