"""Checkpoint and savepoint storage at a URL (issue 15): a real FTP server (pyftpdlib) and a real
S3-compatible server (moto's server mode), each in a process of its own, stand in for remote stores,
reached through fsspec by the JobManager, every TaskManager and each forked snapshot child. The S3
endpoint and credentials reach s3fs through fsspec's environment configuration (FSSPEC_S3_*), as
a deployment would set them. A checkpointed job survives a TaskManager SIGKILL with its state
restored from there, exactly once; its savepoint lands there too and a job resumes from it."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster
from tests.integration.stores import Store, ftp, s3, store  # noqa: F401 (fixtures)
from tests.integration.test_recovery import PROGRAM, committed_counts

N = 40_000


def test_checkpoints_and_savepoints_at_a_url_survive_a_taskmanager_kill(tmp_path: Path, store: Store) -> None:
    url = store.url
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    c.env.update(store.env)
    c.env.update(MILLSTREAM_CHECKPOINT_DIR=f"{url}/checkpoints", MILLSTREAM_SAVEPOINT_DIR=f"{url}/savepoints")
    out_dir = tmp_path / "out"
    try:
        c.start(taskmanagers=2, slots=2)
        run = subprocess.Popen(
            # 2,000 records/s: 20 s, so a savepoint to a slow store (moto under a loaded machine took
            # over 8 s) still leaves the job running when its TaskManager is killed.
            [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), str(N), "2000", str(out_dir)],
            env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        jid = c.wait_new_job(set())
        c.wait_running(jid)
        c.wait_for(lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 2, 60, "checkpoints")
        latest = c.http.get(f"/jobs/{jid}/checkpoints").json()["latest"]["completed"]
        assert latest["external_path"].startswith(f"{url}/checkpoints/{jid}/chk-"), latest
        # They are on the server's disk, not the cluster's.
        assert store.glob(f"checkpoints/{jid}/chk-*/_metadata")
        assert not (tmp_path / "var" / "checkpoints" / jid).exists()

        savepoint = c.cli("savepoint", jid)
        assert savepoint.returncode == 0, savepoint.stdout + savepoint.stderr
        sp_path = re.findall(r"Path: (\S+)", savepoint.stdout)[-1]
        assert sp_path.startswith(f"{url}/savepoints/savepoint-"), sp_path

        assert c.http.get(f"/jobs/{jid}").json()["state"] == "RUNNING", "the job ended before the kill: nothing to restore"
        victim = c.taskmanagers[0]
        c.replace_taskmanager(victim, slots=2)
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err[-3000:]
        written = committed_counts(out_dir)
        assert sorted(written) == sorted(f"k{i}" for i in range(40))
        bad = {k: v for k, v in written.items() if sorted(v) != list(range(1, N // 40 + 1))}
        assert not bad, {k: (len(v), len(set(v))) for k, v in list(bad.items())[:5]}
        assert c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["restored"] >= 1

        # A new job resumes from the savepoint at the URL (its counts carry on from the savepoint's).
        res = c.run(PROGRAM, str(N), "8000", str(tmp_path / "resumed"), options=("-p", "2", "--from-savepoint", sp_path), timeout=240)
        assert res.returncode == 0, res.stderr[-3000:]
        resumed = committed_counts(tmp_path / "resumed")
        for key, counts in resumed.items():  # each key goes on from its count in the savepoint, to the end
            assert sorted(counts) == list(range(min(counts), N // 40 + 1)) and min(counts) > 1, (key, counts[:5])
        # And a path outside the cluster's state directories is refused, remote or not.
        other = c.http.post(f"/jobs/{jid}/savepoints", json={"target-directory": store.elsewhere})
        assert other.status_code in (400, 409), other.text
    finally:
        c.stop()
