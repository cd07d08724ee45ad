"""Both keyed state backends offer the KeyedStateBackend protocol, and the factory picks them by Flink's names."""
from __future__ import annotations

import inspect

import pytest

from millstream.engine.runtime.state.backend import KeyedStateBackend, create_keyed_backend
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend


def _protocol_members() -> set[str]:
    return {n for n in vars(KeyedStateBackend) if not n.startswith("_")} | set(KeyedStateBackend.__annotations__)


def _public_methods(cls: type) -> dict[str, list[str]]:
    """Method name -> parameter names (return types differ: a dict on the heap, a mapping on disk)."""
    return {n: list(inspect.signature(f).parameters) for n, f in vars(cls).items() if callable(f) and not n.startswith("_")}


@pytest.fixture
def both(tmp_path):
    disk = LmdbKeyedStateBackend(64, tmp_path / "s")
    yield [HeapKeyedStateBackend(64), disk]
    disk.close()


def test_both_backends_have_every_protocol_member(both):
    members = _protocol_members()
    assert {"current_key", "tables", "table", "get_state", "snapshot_by_key_group"} <= members
    for backend in both:
        missing = {m for m in members if not hasattr(backend, m)}
        assert not missing, f"{type(backend).__name__} lacks {missing}"


def test_the_lmdb_backend_has_the_heap_backends_methods_with_the_same_signatures():
    heap = _public_methods(HeapKeyedStateBackend)
    disk = _public_methods(LmdbKeyedStateBackend)
    assert {n: p for n, p in disk.items() if n in heap} == heap
    # the heap backend may gain no-op ones; the snapshot pair is how the on-disk one snapshots off the task
    # thread (the heap backend's snapshot is taken in a forked child instead); the incremental trio
    # is the on-disk backend's alone (Flink's HashMap backend has no incremental checkpoints either);
    # the *_parts variants hand a snapshot to its writer a key group at a time (state larger than memory);
    # prepare_keys encodes a batch's keys ahead (the heap backend has no encoding to do)
    assert set(disk) - set(heap) <= {
        "flush", "close", "begin_snapshot", "restore_records",
        "begin_incremental_snapshot", "notify_checkpoint_complete", "notify_checkpoint_aborted",
        "begin_snapshot_parts", "begin_incremental_snapshot_parts", "prepare_keys",
    }


def test_the_factory_picks_by_flinks_names(tmp_path):
    assert type(create_keyed_backend("hashmap", 16, None)) is HeapKeyedStateBackend
    for i, name in enumerate(["rocksdb", "RocksDB ", "lmdb"]):
        b = create_keyed_backend(name, 16, str(tmp_path / str(i)), cache_entries=5)
        assert isinstance(b, LmdbKeyedStateBackend) and b.max_parallelism == 16 and b._capacity == 5
        b.close()


def test_the_factory_passes_the_clock(tmp_path):
    def clock():
        return 42

    assert create_keyed_backend("hashmap", 16, None, clock).clock is clock
    b = create_keyed_backend("rocksdb", 16, tmp_path / "s", clock)
    assert b.clock is clock
    b.close()


def test_the_factory_rejects_unknown_names_and_a_missing_directory():
    with pytest.raises(ValueError, match="unknown state backend 'filesystem'"):
        create_keyed_backend("filesystem", 16, None)
    with pytest.raises(ValueError, match="needs a directory"):
        create_keyed_backend("rocksdb", 16, None)
