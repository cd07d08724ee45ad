"""The on-disk backend's incremental chains are compacted from their files by a writer that can read
them (``rolled_compaction``: a few key groups per checkpoint; the tracker's merge rule,
``merge_start``, for a plan that asks only to merge) instead of writing every record again as a base,
and the compacted chains restore exactly, at the same parallelism and rescaled.

Real LMDB, real sealed files in the checkpoint layout, written by ``snapshot_keyed_incremental`` and
read back through the task's restore path."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millstream.engine.checkpoint import storage as storage_module
from millstream.engine.checkpoint.shared_state_registry import SHARED_DIR
from millstream.engine.checkpoint.storage import METADATA_FILE, read_shared_file, write_shared_file
from millstream.engine.runtime.state.lmdb_backend import LmdbKeyedStateBackend
from millstream.engine.runtime.key_groups import assign_to_key_group
from millstream.engine.runtime.state.state_chain import ChangeTracker, SharedFile, merge_start, with_indexes
from millstream.engine.runtime.state.task_state_manager import snapshot_keyed_incremental
from tests.engine.runtime.state.test_properties_snapshots import _Operator
from tests.engine.runtime.state.test_streamed_restore import JOB, MAX_P, SECRET, _restore_chain


def _files(shared: Path) -> tuple[Any, Any]:
    names = iter(range(1_000_000))

    def write_file(kind: str, parts: Any) -> SharedFile:
        name = f"op-{next(names)}.{kind}"
        size, index = write_shared_file(str(shared), name, parts, JOB)
        return SharedFile(name, kind, size, tuple(index))

    def read_file(name: str, index: list) -> Any:
        return read_shared_file(str(shared), name, index, JOB)

    return write_file, read_file


def test_a_long_on_disk_chain_is_compacted_a_few_key_groups_at_a_time_and_restores_the_same_state(tmp_path, monkeypatch) -> None:
    """With a writer that reads the chain's files, no base is written after the first: each
    checkpoint rebases a few key groups in a partial base (``rolled_compaction``), the first base
    leaves the chain once every key group has a newer one, and the chain restores exactly."""
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)
    shared = tmp_path / "job" / SHARED_DIR
    write_file, read_file = _files(shared)
    backend = LmdbKeyedStateBackend(MAX_P, tmp_path / "db", incremental=True)
    backend.rolled.cycle = 4  # every key group rebased within about 4 checkpoints
    counts = backend.table("counts", "value")
    expected: dict[str, Any] = {}
    for i in range(2_000):
        counts[f"k{i}"] = i
        expected[f"k{i}"] = i
    chains = []
    changed: set[str] = set()
    overlapped = False
    for cid in range(1, 16):
        if cid > 1:  # a few updates, a deletion of a key the base holds, a new key: far less than the state
            for j in range(5):
                key = f"k{(cid * 7 + j) % 2_000}"
                counts[key] = expected[key] = cid * 1_000 + j
                changed.add(key)
            gone = f"k{cid * 13}"
            if gone in expected:
                del counts[gone]
                del expected[gone]
                changed.add(gone)
            counts[f"new{cid}"] = expected[f"new{cid}"] = cid
            changed.add(f"new{cid}")
        out = snapshot_keyed_incremental(backend, _Operator(), cid, write_file, read_file)()
        out.pop("_written", None)
        backend.notify_checkpoint_complete(cid)
        chains.append(out)
        # A key group this checkpoint rebased is left out of its delta (the partial base follows it).
        mine = with_indexes(tuple(SharedFile.from_wire(f) for f in out["chain"][-2:]), read_file)
        based = {kg for f in mine if f.partial for kg, _, _ in f.index}
        assert not based & {kg for f in mine if f.kind == "delta" for kg, _, _ in f.index}
        overlapped |= bool(based & {assign_to_key_group(k, MAX_P) for k in changed})
        changed.clear()
    backend.close()
    assert overlapped  # some checkpoint rebased a key group it had changed
    first = chains[0]["chain"][0]
    assert first["kind"] == "base" and not first.get("partial")
    later = [f for out in chains[1:] for f in out["chain"] if f["kind"] == "base" and f["name"] != first["name"]]
    assert later and all(f.get("partial") for f in later)  # never a whole base again
    assert first["name"] not in {f["name"] for f in chains[-1]["chain"]}
    assert max(len(out["chain"]) for out in chains) <= 12

    chk = tmp_path / "job" / "chk-1"
    chk.mkdir()
    handle = str(chk / "op.state")
    Path(handle).write_bytes(b"")
    (chk / METADATA_FILE).write_bytes(b"{}")  # completed: its chain may be read
    for parallelism in (1, 2):
        got: dict[str, Any] = {}
        for subtask in range(parallelism):
            restored = LmdbKeyedStateBackend(MAX_P, tmp_path / f"restored-{parallelism}-{subtask}")
            _restore_chain(restored, chains[-1], handle, subtask, parallelism)
            got.update(restored.table("counts", "value").items())
            restored.close()
        assert got == expected


def test_the_tracker_merges_instead_of_a_base_only_for_a_writer_that_can_merge() -> None:
    """At ``max_deltas`` a tracker asked with ``merge`` plans a delta on the parent that merges its
    newest files first; without, a base; and with ``merge``, still a base when a restore would replay
    more than twice the live entries."""
    files = (SharedFile("b", "base", 1_000, (), entries=100),) + tuple(SharedFile(f"d{i}", "delta", 10, (), entries=1) for i in range(3))
    for merge, live, expect_base in ((True, 100, False), (False, 100, True), (True, 50, True)):
        tracker = ChangeTracker(max_deltas=3)
        tracker.resume(files)
        tracker.record("s", b"k", b"v")
        plan = tracker.plan(1, live, merge=merge)
        assert plan.is_base is expect_base
        if not expect_base:
            assert plan.parent == files and plan.merge_from == merge_start(files, live, 4) == 1


_examples = iter(range(1_000_000))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 299), st.integers()),
        st.tuples(st.just("delete"), st.integers(0, 299)),
        st.tuples(st.just("checkpoint")),
    ),
    min_size=30,
    max_size=150,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, max_deltas=st.integers(2, 4), restore_at=st.floats(0, 1))
def test_random_updates_through_merged_chains_restore_as_a_dict(tmp_path, monkeypatch, ops, max_deltas, restore_at) -> None:
    """Random puts and deletes over a filled table, checkpoints every few operations, chains short
    enough to merge often: the last chain and one from a random point restore the dict's state then."""
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)
    root = tmp_path / f"ex-{next(_examples)}"
    write_file, read_file = _files(root / "job" / SHARED_DIR)
    backend = LmdbKeyedStateBackend(MAX_P, root / "db", incremental=True)
    backend.changes.max_deltas = max_deltas  # type: ignore[union-attr]
    table = backend.table("v", "value")
    model = {}
    for k in range(300):
        table[k] = model[k] = -k
    taken = []
    for op in [("checkpoint",), *ops, ("checkpoint",)]:
        if op[0] == "put":
            table[op[1]] = model[op[1]] = op[2]
        elif op[0] == "delete" and op[1] in model:
            del table[op[1]]
            del model[op[1]]
        elif op[0] == "checkpoint":
            cid = len(taken) + 1
            out = snapshot_keyed_incremental(backend, _Operator(), cid, write_file, read_file)()
            backend.notify_checkpoint_complete(cid)
            taken.append((out, dict(model)))
    backend.close()
    chk = root / "job" / "chk-1"
    chk.mkdir()
    handle = str(chk / "op.state")
    Path(handle).write_bytes(b"")
    (chk / METADATA_FILE).write_bytes(b"{}")
    for out, then in (taken[-1], taken[int(restore_at * (len(taken) - 1))]):
        restored = LmdbKeyedStateBackend(MAX_P, root / f"restored-{next(_examples)}")
        _restore_chain(restored, out, handle, 0, 1)
        assert dict(restored.table("v", "value").items()) == then
        restored.close()
