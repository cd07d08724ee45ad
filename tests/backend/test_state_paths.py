"""Issue 14 item 3: what a REST caller can point the JobManager at (real app, real Redis, SQLite).

Savepoint targets, ``savepointPath`` and a job's own state directories must lie under the
cluster's state roots; a path outside is a 400 that reads the same whether it exists or not
and touches nothing. State handles inside ``_metadata`` are stored relative and must resolve
inside the directory holding it; a TaskManager reads only .state files of completed checkpoints.
"""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from millstream.engine.checkpoint.storage import FileSystemCheckpointStorage, InvalidSavepoint
from millstream.engine.datastream import StreamExecutionEnvironment
from tests.backend.test_rest_api import FAKE_TM_SETTINGS
from tests.backend.test_savepoints_api import running_job
from tests.backend.test_security import job_files

PROGRAM = b"""
from pyflink.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2, 3]).print()
env.execute("restored")
"""


@pytest.fixture
def api(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from millstream.backend.app import create_app
    from millstream.backend.settings import Settings

    monkeypatch.setenv("MILLSTREAM_STATE_DIRS", str(tmp_path / "allowed"))
    settings = Settings(redis_url=redis_url, data_dir=tmp_path / "var", **FAKE_TM_SETTINGS)
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture
def rds(redis_url: str):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def _masked(text: str, path: str) -> str:
    return text.replace(path, "<path>")


def test_savepoint_targets_outside_the_roots_are_refused_untouched(api: TestClient, rds, tmp_path: Path):
    jid, _ = running_job(api, rds)
    existing, missing = str(tmp_path / "elsewhere"), str(tmp_path / "nowhere" / "deep")
    os.makedirs(existing)
    answers = []
    for path in (existing, missing, str(tmp_path / "allowed" / ".." / "escape"), "/etc"):
        for url, body in ((f"/jobs/{jid}/savepoints", {"target-directory": path}), (f"/jobs/{jid}/stop", {"targetDirectory": path})):
            r = api.post(url, json=body)
            assert r.status_code == 400, (path, r.text)
            answers.append(_masked(r.text, path))
    assert len(set(answers)) == 1  # never "exists" vs "does not exist"
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "escape").exists()
    assert os.listdir(existing) == []
    # Inside a root it is taken as before.
    r = api.post(f"/jobs/{jid}/savepoints", json={"target-directory": str(tmp_path / "allowed" / "sp")})
    assert r.status_code == 202, r.text


def test_a_symlink_out_of_a_root_is_outside(api: TestClient, rds, tmp_path: Path):
    jid, _ = running_job(api, rds)
    (tmp_path / "allowed").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "allowed" / "link").symlink_to(tmp_path / "outside")
    r = api.post(f"/jobs/{jid}/savepoints", json={"target-directory": str(tmp_path / "allowed" / "link" / "sp")})
    assert r.status_code == 400
    assert os.listdir(tmp_path / "outside") == []


def test_savepoint_paths_of_submissions_outside_the_roots_are_refused(api: TestClient, tmp_path: Path):
    jar = api.post("/jars/upload", files={"jarfile": ("p.py", PROGRAM)}).json()["filename"]
    existing = tmp_path / "real-savepoint"
    existing.mkdir()
    (existing / "_metadata").write_text("{}")
    texts = []
    for path in (str(existing), str(tmp_path / "no-such-savepoint")):
        r = api.post(f"/jars/{jar}/run", json={"savepointPath": path})
        assert r.status_code == 400, r.text
        texts.append(_masked(r.text, path))
    assert texts[0] == texts[1]
    # A JobGraph naming directories in its own config is refused the same way.
    env = StreamExecutionEnvironment()
    env.get_checkpoint_config().set_checkpoint_storage_dir(str(tmp_path / "chk-elsewhere"))
    env.from_collection([1]).print()
    graph, stream = env.get_job_graph("own-dirs")
    import cloudpickle

    files = {"jobgraph": (None, json.dumps(graph.to_dict())), "usercode": ("u.bin", cloudpickle.dumps(stream))}
    r = api.post("/jobs", files=files)
    assert r.status_code == 400 and "state.checkpoints.dir" in r.text, r.text
    assert api.get("/jobs/overview").json()["jobs"] == []


def _savepoint(directory: Path, handle: str) -> Path:
    directory.mkdir(parents=True)
    meta = {"checkpoint_id": 1, "operators": [{"operator_id": "op", "subtasks": [{"index": 0, "handle": handle}]}]}
    (directory / "_metadata").write_text(json.dumps(meta))
    return directory


@pytest.mark.parametrize("handle", ["/etc/passwd", "../outside.state", "sub/../../outside.state"])
def test_metadata_handles_outside_their_directory_are_refused(api: TestClient, tmp_path: Path, handle: str):
    (tmp_path / "allowed").mkdir(exist_ok=True)
    (tmp_path / "allowed" / "outside.state").write_bytes(pickle.dumps({}))
    sp = _savepoint(tmp_path / "allowed" / "savepoint-abc123-000000000000", handle)
    jar = api.post("/jars/upload", files={"jarfile": ("p.py", PROGRAM)}).json()["filename"]
    r = api.post(f"/jars/{jar}/run", json={"savepointPath": str(sp)})
    assert r.status_code == 400 and "outside the checkpoint directory" in r.text, r.text
    with pytest.raises(InvalidSavepoint, match="outside the checkpoint directory"):
        FileSystemCheckpointStorage(str(tmp_path)).read_metadata(str(sp))


def test_handles_are_stored_relative_and_a_moved_savepoint_still_reads(tmp_path: Path):
    storage = FileSystemCheckpointStorage(str(tmp_path / "chk"))
    location = str(tmp_path / "sp" / "savepoint-abc123-000000000001")
    handle = storage.write_task_state("j" * 32, 7, ("v", 0), "op", pickle.dumps({"n": 1}), location)
    storage.write_metadata(
        "j" * 32, 7, {"checkpoint_id": 7, "operators": [{"operator_id": "op", "subtasks": [{"index": 0, "handle": handle}]}]},
        location,
    )
    on_disk = json.loads((Path(location) / "_metadata").read_text())
    assert on_disk["operators"][0]["subtasks"][0]["handle"] == os.path.basename(handle)
    moved = tmp_path / "moved" / "savepoint-abc123-000000000001"
    moved.parent.mkdir()
    os.rename(location, moved)
    meta = storage.read_metadata(str(moved))
    resolved = meta["operators"][0]["subtasks"][0]["handle"]
    assert resolved == str((moved / os.path.basename(handle)).resolve())
    assert pickle.loads(FileSystemCheckpointStorage.read_state_file(resolved)) == {"n": 1}


def test_a_taskmanager_reads_only_state_files_of_completed_checkpoints(tmp_path: Path):
    loose = tmp_path / "loose.state"
    loose.write_bytes(pickle.dumps({}))
    incomplete = tmp_path / "chk-3"
    incomplete.mkdir()
    (incomplete / "a.state").write_bytes(pickle.dumps({}))
    for handle in ("/etc/passwd", str(loose), str(incomplete / "a.state")):
        with pytest.raises(InvalidSavepoint, match="must be a .state file"):
            FileSystemCheckpointStorage.read_state_file(handle)
    (incomplete / "_metadata").write_text("{}")
    assert FileSystemCheckpointStorage.read_state_file(str(incomplete / "a.state")) == pickle.dumps({})
