"""FileSystemCheckpointStorage: layout, atomic writes, metadata written last, clear errors."""
from __future__ import annotations

import json
import os

import pytest

from millstream.engine.checkpoint import storage as storage_module
from millstream.engine.checkpoint.storage import (
    METADATA_FILE,
    CheckpointStorageError,
    FileSystemCheckpointStorage,
    InvalidSavepoint,
    checkpoint_location,
    savepoint_location,
)

JOB = "ef" * 16


def meta_for(handles: list[str], cid: int = 3) -> dict:
    return {
        "format": "millstream-checkpoint-metadata",
        "version": 1,
        "job_id": JOB,
        "checkpoint_id": cid,
        "operators": [{"operator_id": "op", "subtasks": [{"index": i, "handle": h} for i, h in enumerate(handles)]}],
    }


def test_layout_of_checkpoints_and_savepoints() -> None:
    assert checkpoint_location("/data", JOB, 7) == f"/data/{JOB}/chk-7"
    sp = savepoint_location("/sp", JOB, 7)
    assert os.path.dirname(sp) == "/sp"
    assert os.path.basename(sp).startswith(f"savepoint-{JOB[:6]}-")
    assert savepoint_location("/sp", JOB, 7) == sp  # repeatable
    assert savepoint_location("/sp", JOB, 8) != sp and savepoint_location("/sp", "ef" * 15 + "00", 7) != sp


def test_task_state_is_written_under_chk_n_and_read_back(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    h = s.write_task_state(JOB, 3, ("vtx", 1), "op-a", b"state bytes")
    assert os.path.dirname(h) == os.path.join(str(tmp_path), JOB, "chk-3")
    assert s.read_task_state(h) == b"state bytes"
    sp_dir = str(tmp_path / "sp" / "savepoint-x")
    h2 = s.write_task_state(JOB, 4, ("vtx", 1), "op-a", b"sp", location=sp_dir)
    assert os.path.dirname(h2) == sp_dir


def test_writes_are_atomic_and_leave_no_temp_files(tmp_path, monkeypatch) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    h = s.write_task_state(JOB, 1, ("v", 0), "op", b"old")

    def crash(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage_module.os, "replace", crash)
    with pytest.raises(CheckpointStorageError, match="No space left on device"):
        s.write_task_state(JOB, 1, ("v", 0), "op", b"new, half written")
    monkeypatch.undo()
    assert open(h, "rb").read() == b"old"
    assert os.listdir(os.path.dirname(h)) == [os.path.basename(h)]


def test_metadata_round_trip_and_its_absence_means_incomplete(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    handles = [s.write_task_state(JOB, 3, ("v", i), "op", b"x") for i in range(2)]
    chk = s.location(JOB, 3)
    with pytest.raises(InvalidSavepoint, match="no _metadata file; the checkpoint is incomplete") as e:
        s.read_metadata(chk)
    assert e.value.path == chk
    path = s.write_metadata(JOB, 3, meta_for(handles))
    assert path == chk and os.path.isfile(os.path.join(chk, METADATA_FILE))
    assert s.read_metadata(chk)["operators"][0]["subtasks"][1]["handle"] == handles[1]
    assert s.read_metadata(os.path.join(chk, METADATA_FILE))["checkpoint_id"] == 3  # the file itself works too


def test_missing_savepoint_path_is_a_clear_error(tmp_path) -> None:
    missing = str(tmp_path / "nowhere" / "savepoint-abc")
    with pytest.raises(InvalidSavepoint, match="does not exist") as e:
        FileSystemCheckpointStorage(str(tmp_path)).read_metadata(missing)
    assert missing in str(e.value)


def test_corrupt_metadata_is_a_clear_error(tmp_path) -> None:
    d = tmp_path / "savepoint-corrupt"
    d.mkdir()
    (d / METADATA_FILE).write_bytes(b'{"operators": [tru')
    s = FileSystemCheckpointStorage(str(tmp_path))
    with pytest.raises(InvalidSavepoint, match="_metadata is corrupt") as e:
        s.read_metadata(str(d))
    assert str(d) in str(e.value)
    (d / METADATA_FILE).write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InvalidSavepoint, match="corrupt"):
        s.read_metadata(str(d))
    (d / METADATA_FILE).write_text(json.dumps([1, 2, 3]))
    with pytest.raises(InvalidSavepoint, match="not Millstream checkpoint metadata"):
        s.read_metadata(str(d))


def test_metadata_naming_a_missing_state_file_is_rejected(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    h = s.write_task_state(JOB, 3, ("v", 0), "op", b"x")
    s.write_metadata(JOB, 3, meta_for([h, os.path.join(s.location(JOB, 3), "gone.state")]))  # inside: outside is refused
    with pytest.raises(InvalidSavepoint, match="1 state file.* missing.*gone.state"):
        s.read_metadata(s.location(JOB, 3))


def test_unserialisable_metadata_is_a_storage_error(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    with pytest.raises(CheckpointStorageError, match="checkpoint 3 metadata is not JSON-serialisable"):
        s.write_metadata(JOB, 3, {"operators": [], "checkpoint_id": 3, "bad": object()})
    assert not os.path.exists(os.path.join(s.location(JOB, 3), METADATA_FILE))


def test_discard_removes_a_checkpoint_and_refuses_other_directories(tmp_path) -> None:
    s = FileSystemCheckpointStorage(str(tmp_path))
    s.write_task_state(JOB, 5, ("v", 0), "op", b"x")
    chk = s.location(JOB, 5)
    s.discard(chk)
    assert not os.path.exists(chk)
    s.discard(chk)  # already gone: fine
    with pytest.raises(CheckpointStorageError, match="refusing to discard"):
        s.discard(str(tmp_path))
    assert os.path.isdir(tmp_path)


def test_not_writable_directory_under_a_regular_file_names_the_directory(tmp_path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    bad = str(tmp_path / "afile" / "sub")
    s = FileSystemCheckpointStorage(bad)
    with pytest.raises(CheckpointStorageError, match="not writable") as e:
        s.check_writable()
    assert bad in str(e.value)
    with pytest.raises(CheckpointStorageError, match="cannot write"):
        s.write_task_state(JOB, 1, ("v", 0), "op", b"x")
    FileSystemCheckpointStorage(str(tmp_path / "fine")).check_writable()


@pytest.mark.skipif(os.geteuid() == 0, reason="root bypasses directory permissions")
def test_read_only_directory_is_not_writable(tmp_path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(CheckpointStorageError, match=str(ro)):
            FileSystemCheckpointStorage(str(ro)).check_writable()
    finally:
        ro.chmod(0o700)
