"""SharedStateRegistry and the coordinator's retention of incremental checkpoints' shared files (pure),
the ``_metadata`` round trip that rebuilds it after a JobManager restart, and the confinement of
shared file names in checkpoint storage."""
from __future__ import annotations

import os

import pytest

from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint, OperatorInfo
from millstream.engine.checkpoint.config import CheckpointConfig
from millstream.engine.checkpoint.coordinator import CheckpointCoordinator
from millstream.engine.checkpoint.messages import TaskAck
from millstream.engine.checkpoint.shared_state_registry import SharedStateRegistry
from millstream.engine.checkpoint.storage import (
    CheckpointStorageError,
    InvalidSavepoint,
    discard_shared,
    read_shared_parts,
    sweep_shared,
    write_shared_file,
)

JOB = "cd" * 16
TASKS = [("agg", 0), ("agg", 1)]
OPERATORS = [OperatorInfo("op-agg", "agg", 2, 128, uid="counts")]


def coordinator(retained: int = 1, completed=()) -> CheckpointCoordinator:
    cfg = CheckpointConfig(interval_ms=1000, retained=retained, storage_dir="/ckpt", max_concurrent=5)
    return CheckpointCoordinator(JOB, cfg, TASKS, TASKS, OPERATORS, completed=completed)


def complete(c: CheckpointCoordinator, now: int, chains: dict[int, list[str]]) -> CompletedCheckpoint:
    """Trigger and acknowledge one checkpoint whose subtask i refers to ``chains[i]``."""
    cid = c.trigger_checkpoint(now).checkpoint_id
    done = None
    for vid, sub in TASKS:
        a = TaskAck(state_handles={"op-agg": f"/ckpt/{JOB}/chk-{cid}/s{sub}.state"}, shared_files={"op-agg": tuple(chains[sub])})
        done = c.receive_ack(cid, (vid, sub), a, now) or done
    assert done is not None
    return done


def deleted(done: CompletedCheckpoint) -> set[str]:
    return {n for d in done.discard for n in d.shared_files}


def test_a_file_is_deleted_only_when_the_last_retained_checkpoint_using_it_goes() -> None:
    c = coordinator(retained=1)
    complete(c, 1, {0: ["b0.base"], 1: ["b1.base"]})
    second = complete(c, 2, {0: ["b0.base", "d0-2.delta"], 1: ["b1.base", "d1-2.delta"]})
    assert deleted(second) == set()  # checkpoint 1 went, but its bases are still in use
    third = complete(c, 3, {0: ["n0.base"], 1: ["b1.base", "d1-2.delta", "d1-3.delta"]})
    assert deleted(third) == {"b0.base", "d0-2.delta"}
    assert all(d.shared_dir == os.path.join("/ckpt", JOB, "shared") for d in third.discard if d.shared_files)
    assert "b1.base" in c.shared_registry and c.shared_registry.references("b1.base") == {3}


def test_a_failed_checkpoint_deletes_the_files_it_wrote_but_not_the_chain_it_refers_to() -> None:
    c = coordinator(retained=1)
    complete(c, 1, {0: ["b0.base"], 1: ["b1.base"]})
    cid = c.trigger_checkpoint(2).checkpoint_id
    c.receive_ack(cid, ("agg", 0), TaskAck(shared_files={"op-agg": ("b0.base", "d0-2.delta")}), 2)
    failed = c.receive_decline(cid, ("agg", 1), "boom", 3)
    assert failed is not None and failed.discard is not None
    assert failed.discard.shared_files == ("d0-2.delta",)


def test_a_checkpoint_whose_metadata_cannot_be_written_gives_back_what_it_subsumed() -> None:
    c = coordinator(retained=1)
    complete(c, 1, {0: ["b0.base"], 1: ["b1.base"]})
    second = complete(c, 2, {0: ["n0.base"], 1: ["n1.base"]})
    assert deleted(second) == {"b0.base", "b1.base"}  # what the caller would delete after _metadata
    failed = c.fail_finalization(second.checkpoint_id, "disk full", 3)
    assert failed is not None and set(failed.discard.shared_files) == {"n0.base", "n1.base"}
    assert "b0.base" in c.shared_registry and "n0.base" not in c.shared_registry


def test_after_a_jobmanager_restart_the_registry_is_rebuilt_from_metadata_and_retention_goes_on() -> None:
    before = coordinator(retained=2)
    first = complete(before, 1, {0: ["b0.base"], 1: ["b1.base"]})
    second = complete(before, 2, {0: ["b0.base", "d0.delta"], 1: ["b1.base", "d1.delta"]})
    on_disk = [CompletedCheckpoint.from_metadata(x.to_metadata(), f"/ckpt/{JOB}/chk-{x.checkpoint_id}") for x in (first, second)]
    assert on_disk[1].shared_names() == {"b0.base", "d0.delta", "b1.base", "d1.delta"}

    after = coordinator(retained=2)  # a new JobManager: nothing known until storage is read
    after.adopt_retained(on_disk)
    after.restore_from(on_disk[1], 10)
    assert [x.checkpoint_id for x in after.completed] == [1, 2] and not after.savepoints
    third = complete(after, 11, {0: ["n0.base"], 1: ["b1.base", "d1.delta", "d1-3.delta"]})
    assert deleted(third) == set()  # checkpoint 1 went; its files are all used by 2 or 3
    fourth = complete(after, 12, {0: ["n0.base"], 1: ["m1.base"]})
    assert deleted(fourth) == {"b0.base", "d0.delta"}
    assert third.checkpoint_id == 3  # ids continue after the adopted ones


def test_registry_refuses_names_that_are_paths() -> None:
    r = SharedStateRegistry()
    for bad in ("../x.base", "/etc/passwd", "a/b.delta", ".hidden.base", "x.state"):
        with pytest.raises(ValueError):
            r.register(1, [bad])


def test_shared_parts_are_read_only_for_a_completed_checkpoints_handle_and_a_plain_name(tmp_path) -> None:
    job = tmp_path / JOB
    size, index = write_shared_file(str(job / "shared"), "f-1.base", [(3, b"three"), (7, b"seven")], JOB)
    assert size == sum(length for _, _, length in index)
    chk = job / "chk-1"
    chk.mkdir()
    handle = chk / "s0.state"
    handle.write_bytes(b"")
    with pytest.raises(InvalidSavepoint):  # no _metadata: not a completed checkpoint
        read_shared_parts(str(handle), "f-1.base", [index[1]])
    (chk / "_metadata").write_bytes(b"{}")
    assert read_shared_parts(str(handle), "f-1.base", [index[1]]) == [(7, b"seven")]
    for bad in ("../chk-1/_metadata", "f-1.state"):
        with pytest.raises(InvalidSavepoint):
            read_shared_parts(str(handle), bad, [(0, 0, 1)])
    with pytest.raises(CheckpointStorageError):
        discard_shared(str(job / "shared"), ["../chk-1/_metadata"])
    discard_shared(str(job / "shared"), ["f-1.base", "gone.delta"])
    assert not (job / "shared" / "f-1.base").exists() and (chk / "_metadata").exists()


def test_a_sweep_deletes_unreferenced_and_half_written_shared_files_only(tmp_path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("kept.base", "orphan.delta", ".orphan2.delta." + "a" * 32 + ".tmp", "notes.txt", ".hidden"):
        (shared / name).write_bytes(b"x")
    gone = sweep_shared(str(shared), lambda name: name == "kept.base")
    assert sorted(gone) == sorted(["orphan.delta", ".orphan2.delta." + "a" * 32 + ".tmp"])
    assert sorted(p.name for p in shared.iterdir()) == [".hidden", "kept.base", "notes.txt"]
    assert sweep_shared(str(tmp_path / "none"), lambda name: False) == []
