"""Sealed state files are bound to what they belong to (issue 14): the job and checkpoint that wrote them,
the file (operator, vertex, subtask) and the piece. Real files in the checkpoint layout, real sealing.

A genuine sealed file copied into another checkpoint of the same job, or into another job, under the same
name, is refused before anything decodes it; a savepoint still restores into a new job, rescaled; the
previous release's sealing (bound to the file name only) still restores, and never passes for the new one.
"""
from __future__ import annotations

import json
import os
import pickle
import shutil

import pytest

from millstream.engine.checkpoint import state_file
from millstream.engine.checkpoint import storage as storage_module
from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint, OperatorInfo
from millstream.engine.checkpoint.messages import CheckpointType, TaskAck
from millstream.engine.checkpoint.rescale import TaskRestore, plan_restore
from millstream.engine.checkpoint.state_origin import StateOrigin
from millstream.engine.checkpoint.storage import (
    FileSystemCheckpointStorage,
    InvalidSavepoint,
    read_shared_parts,
    write_shared_file,
)
from millstream.engine.runtime.key_groups import key_group_range
from millstream.engine.runtime.state.key_grouped_state import decode_state, encode_state
from millstream.engine.security.mac import Sealer

SECRET = "binding-test-secret-" + "x" * 20
JOB_A = "a" * 32
JOB_B = "b" * 32
MAX_P = 8
OPS = (OperatorInfo("op", "v", 2, MAX_P),)


@pytest.fixture(autouse=True)
def sealing(monkeypatch) -> None:
    monkeypatch.setitem(storage_module._sealing, "secret", SECRET)


def _keyed_state(subtask: int, parallelism: int) -> dict:
    """Keyed state of one subtask: a value per key group it owns, and operator state."""
    kgs = key_group_range(MAX_P, parallelism, subtask)
    return {"keyed": {kg: {"v": [(f"k{kg}", kg * 10)]} for kg in kgs}, "kinds": {"v": "value"}, "operator": [subtask]}


def _checkpoint(storage: FileSystemCheckpointStorage, job: str, cid: int, location: str | None = None) -> str:
    """A completed checkpoint (or savepoint at ``location``) of ``job`` at parallelism 2: real state files
    (key-grouped) and a sealed ``_metadata``; returns its directory."""
    acks = {}
    for i in range(2):
        h = storage.write_task_state(job, cid, ("v", i), "op", encode_state(_keyed_state(i, 2)), location)
        acks[("v", i)] = TaskAck({"op": h}, 1)
    ctype = CheckpointType.SAVEPOINT if location else CheckpointType.CHECKPOINT
    done = CompletedCheckpoint.from_acks(job, cid, ctype, 1, 2, location, acks, OPS)
    return storage.write_metadata(job, cid, done.to_metadata(), location)


def _restore_plan(storage: FileSystemCheckpointStorage, path: str, parallelism: int) -> dict:
    """What the JobManager sends each new subtask, through the deploy descriptor's dict form."""
    checkpoint = CompletedCheckpoint.from_metadata(storage.read_metadata(path), path)
    plan = plan_restore(checkpoint, [OperatorInfo("op", "v2", parallelism, MAX_P)])
    return {tid: TaskRestore.from_dict(r.to_dict()) for tid, r in plan.items()}


def _restored_values(storage: FileSystemCheckpointStorage, path: str, parallelism: int) -> dict:
    """Every key's value, as the new subtasks read their key groups from the files (stream_task's reads)."""
    got: dict = {}
    for (_, j), restore in _restore_plan(storage, path, parallelism).items():
        spec = restore.operators["op"]
        for handle in spec.handles.values():
            state = decode_state(FileSystemCheckpointStorage.read_state_file_key_groups(handle, spec.key_groups, restore.origin))
            for groups in state.get("keyed", {}).values():
                got.update(dict(groups["v"]))
    return got


EXPECTED = {f"k{kg}": kg * 10 for kg in range(MAX_P)}


@pytest.mark.parametrize("blob", [False, True], ids=["key-grouped", "single-blob"])
def test_a_state_file_copied_into_another_checkpoint_of_the_job_is_refused(tmp_path, blob) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    data = pickle.dumps({"operator": [1]}) if blob else encode_state(_keyed_state(0, 2))
    assert state_file.is_key_grouped(data) is not blob
    old = s.write_task_state(JOB_A, 1, ("v", 0), "op", data)
    new = s.write_task_state(JOB_A, 2, ("v", 0), "op", data)
    for d in (s.location(JOB_A, 1), s.location(JOB_A, 2)):
        open(os.path.join(d, "_metadata"), "w").write("{}")
    assert FileSystemCheckpointStorage.read_state_file(new, StateOrigin(JOB_A, 2)) == data
    shutil.copyfile(old, new)  # checkpoint 1's genuine file, under the same name in checkpoint 2
    with pytest.raises(InvalidSavepoint, match=f"not sealed .* for checkpoint 2 of job {JOB_A}: copied from another"):
        FileSystemCheckpointStorage.read_state_file(new, StateOrigin(JOB_A, 2))
    if not blob:  # a partial read (a rescaled restore's) checks the head first, and refuses too
        with pytest.raises(InvalidSavepoint, match="for checkpoint 2 of job"):
            FileSystemCheckpointStorage.read_state_file_key_groups(new, range(0, 2), StateOrigin(JOB_A, 2))
    # Where it came from, it still opens.
    assert FileSystemCheckpointStorage.read_state_file(old, StateOrigin(JOB_A, 1)) == data


def test_a_state_file_copied_into_another_jobs_checkpoint_is_refused_on_restore(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    a = _checkpoint(s, JOB_A, 3)
    b = _checkpoint(s, JOB_B, 3)  # same checkpoint id, same operator, vertex and subtasks: same file names
    assert _restored_values(s, b, 2) == EXPECTED
    name = "op-v-1.state"
    shutil.copyfile(os.path.join(a, name), os.path.join(b, name))
    with pytest.raises(InvalidSavepoint, match=f"for checkpoint 3 of job {JOB_B}: copied from another checkpoint or job"):
        _restored_values(s, b, 2)


def test_files_swapped_between_subtasks_or_key_groups_are_refused(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    a = _checkpoint(s, JOB_A, 1)
    f0, f1 = os.path.join(a, "op-v-0.state"), os.path.join(a, "op-v-1.state")
    d0, d1 = open(f0, "rb").read(), open(f1, "rb").read()
    open(f0, "wb").write(d1)  # subtask 1's genuine file as subtask 0's
    with pytest.raises(InvalidSavepoint, match="not sealed"):
        FileSystemCheckpointStorage.read_state_file(f0, StateOrigin(JOB_A, 1))
    # One key group's genuine part moved under another key group's index entry.
    head_n = state_file.head_length(d0[: state_file.PREFIX_BYTES])
    origin = StateOrigin(JOB_A, 1)
    sealed_head = d0[state_file.PREFIX_BYTES : state_file.PREFIX_BYTES + head_n]
    _, index = state_file.decode_head(
        storage_module._open(storage_module._file_context(origin, "op-v-0.state", "head"), sealed_head, f0)
    )
    (kg0, off0, len0), (kg1, off1, len1) = index[0], index[1]
    body = d0[state_file.PREFIX_BYTES + head_n :]
    swapped = body[off1 : off1 + len1] + body[off0 : off0 + len0] + body[off1 + len1 :]
    assert len0 == len1  # same-sized parts, so the offsets stay valid and only the binding tells them apart
    open(f0, "wb").write(d0[: state_file.PREFIX_BYTES + head_n] + swapped)
    with pytest.raises(InvalidSavepoint, match="not sealed"):
        FileSystemCheckpointStorage.read_state_file_key_groups(f0, range(kg0, kg0 + 1), origin)


def test_a_savepoint_restores_into_a_new_job_and_rescaled(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path / "chk"))
    target = str(tmp_path / "savepoints" / "savepoint-aaaaaa-000000000007")
    path = _checkpoint(s, JOB_A, 7, location=target)
    moved = str(tmp_path / "elsewhere" / "savepoint-aaaaaa-0123456789ab")
    shutil.move(path, moved)  # savepoints are relocatable: the binding is not to their directory
    for parallelism in (2, 3, 1):  # as taken, scaled up, scaled down; read by a new job's tasks
        plans = _restore_plan(s, moved, parallelism)
        assert {r.origin for r in plans.values()} == {StateOrigin(JOB_A, 7)}  # the writer's job, not the reader's
        assert _restored_values(s, moved, parallelism) == EXPECTED


def test_a_shared_file_copied_into_another_jobs_shared_directory_is_refused(tmp_path) -> None:
    parts = [(0, b"zero"), (1, b"one")]
    dirs = {}
    for job in (JOB_A, JOB_B):
        chk = tmp_path / job / "chk-1"
        chk.mkdir(parents=True)
        (chk / "op-v-0.state").write_bytes(b"")
        (chk / "_metadata").write_bytes(b"{}")
        dirs[job] = chk
    name = "op-v-0-0-1-abcd1234.base"
    _, index = write_shared_file(str(tmp_path / JOB_A / "shared"), name, parts, JOB_A)
    handle_a = str(dirs[JOB_A] / "op-v-0.state")
    # Later checkpoints of the same job refer to it by name: no checkpoint id in its binding.
    assert read_shared_parts(handle_a, name, index, StateOrigin(JOB_A, 5)) == parts
    shutil.copytree(tmp_path / JOB_A / "shared", tmp_path / JOB_B / "shared")
    with pytest.raises(InvalidSavepoint, match=f"job {JOB_B}: copied from another checkpoint or job"):
        read_shared_parts(str(dirs[JOB_B] / "op-v-0.state"), name, index, StateOrigin(JOB_B, 1))


def test_a_sealed_read_without_an_origin_is_refused(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    a = _checkpoint(s, JOB_A, 1)
    with pytest.raises(InvalidSavepoint, match="no checkpoint is named"):
        FileSystemCheckpointStorage.read_state_file(os.path.join(a, "op-v-0.state"))


def test_metadata_naming_another_checkpoint_is_not_written(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    with pytest.raises(storage_module.CheckpointStorageError, match="another job or checkpoint"):
        s.write_metadata(JOB_A, 2, {"job_id": JOB_A, "checkpoint_id": 1, "operators": []})


# -- the previous release's format ------------------------------------------------------------


def _legacy_seal(name: str, data: bytes) -> bytes:
    """How the previous release sealed a piece: bound to its (base) name only."""
    return Sealer(SECRET, "state", name).seal(data)


def _legacy_savepoint(tmp_path) -> str:
    """A savepoint as the previous release wrote it, byte for byte: key-grouped files whose head and
    parts are bound to the name (``<name>#<key group>`` for a part), ``_metadata`` to "_metadata"."""
    d = tmp_path / "savepoint-aaaaaa-000000000001"
    d.mkdir()
    acks = {}
    for i in range(2):
        name = f"op-v-{i}.state"
        payload, index, body = state_file.split(encode_state(_keyed_state(i, 2)))
        parts, sealed_index, offset = [], [], 0
        for kg, off, length in index:
            part = _legacy_seal(f"{name}#{kg}", bytes(body[off : off + length]))
            sealed_index.append((kg, offset, len(part)))
            parts.append(part)
            offset += len(part)
        (d / name).write_bytes(state_file.pack(_legacy_seal(name, state_file.encode_head(payload, sealed_index)), parts))
        acks[("v", i)] = TaskAck({"op": name}, 1)
    meta = CompletedCheckpoint.from_acks(JOB_A, 4, CheckpointType.SAVEPOINT, 1, 2, str(d), acks, OPS).to_metadata()
    (d / "_metadata").write_bytes(_legacy_seal("_metadata", json.dumps(meta).encode()))
    return str(d)


def test_a_savepoint_of_the_previous_release_still_restores_rescaled(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path / "chk"))
    path = _legacy_savepoint(tmp_path)
    assert s.read_metadata(path)["seal_format"] == 1
    for parallelism in (2, 3):
        assert {r.origin.legacy for r in _restore_plan(s, path, parallelism).values()} == {True}
        assert _restored_values(s, path, parallelism) == EXPECTED


def test_a_new_checkpoint_never_opens_a_file_of_the_previous_format(tmp_path) -> None:
    """The old binding's weakness stays with old checkpoints: a genuine old-format file put into a new
    checkpoint is refused, and a new-format file never opens as an old-format one."""
    s = FileSystemCheckpointStorage(str(tmp_path / "chk"))
    legacy = _legacy_savepoint(tmp_path)
    new = _checkpoint(s, JOB_A, 4, location=str(tmp_path / "savepoint-aaaaaa-00000000000a"))
    assert s.read_metadata(new)["seal_format"] == 2
    shutil.copyfile(os.path.join(legacy, "op-v-0.state"), os.path.join(new, "op-v-0.state"))
    with pytest.raises(InvalidSavepoint, match="not sealed"):
        _restored_values(s, new, 2)
    fresh = _checkpoint(s, JOB_A, 4, location=str(tmp_path / "savepoint-aaaaaa-00000000000b"))
    shutil.copyfile(os.path.join(fresh, "op-v-1.state"), os.path.join(legacy, "op-v-1.state"))
    with pytest.raises(InvalidSavepoint, match="previous release's format"):
        _restored_values(s, legacy, 2)


def test_a_jobmanager_recovering_skips_a_metadata_copied_from_another_checkpoint_or_job(tmp_path) -> None:
    """A whole checkpoint (its _metadata and the files it names) copied under another chk-<n> of the
    job, or from another job, is genuine but not that checkpoint: recovery does not take it as newest."""
    from millstream.engine.datastream import StreamExecutionEnvironment
    from millstream.engine.jobmanager.checkpointing import JobCheckpointing

    env = StreamExecutionEnvironment().set_parallelism(1)
    env.from_collection([1]).print()
    jg, _ = env.get_job_graph("recovering")
    base = str(tmp_path / "checkpoints")
    s = FileSystemCheckpointStorage(base)
    own = _checkpoint(s, jg.job_id, 3)
    other = _checkpoint(s, JOB_B, 12)
    shutil.copytree(own, s.location(jg.job_id, 8))
    shutil.copytree(other, s.location(jg.job_id, 12))
    latest = JobCheckpointing(jg, None, base).latest_in_storage()
    assert latest is not None and (latest.job_id, latest.checkpoint_id) == (jg.job_id, 3)
    assert latest.external_path == own
