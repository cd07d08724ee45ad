"""Incremental checkpoints at a URL: both backends' chains on a real S3-compatible server (moto's server
mode, through s3fs as a deployment reaches S3). The job's shared files are written there, a
TaskManager SIGKILL restores from a chain read back from there with exact output, and when the job
ends its checkpoints and every shared file go. The heap backend forks no base (at a URL a forked
child must not open connections to a store anyway): where one is due it writes a delta of every key."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cluster import Cluster
from tests.integration.stores import Store, s3  # noqa: F401 (fixture)
from tests.integration.test_incremental_checkpoints import KEYS, PROGRAM, _exact


@pytest.mark.parametrize("backend", ["rocksdb", "hashmap"])
def test_a_job_restores_from_an_incremental_chain_on_s3_after_a_taskmanager_kill(tmp_path: Path, s3: Store, backend: str) -> None:  # noqa: F811
    n = 60_000
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    c.env.update(s3.env)
    checkpoints = f"{s3.url}/checkpoints"
    c.env.update(MILLSTREAM_CHECKPOINT_DIR=checkpoints)
    try:
        c.start(taskmanagers=2, slots=1)
        run = c.start_run(PROGRAM, str(n), "3000", str(KEYS), str(tmp_path / "out"), checkpoints, backend, options=("-p", "2"))
        jid = c.wait_new_job(set())

        def deltas() -> list[str]:
            s3.fs.invalidate_cache()
            return [p for p in s3.glob(f"checkpoints/{jid}/shared/*") if p.endswith(".delta")]

        # deltas on the store, and a completed checkpoint that wrote less than its state (a delta)
        c.wait_for(lambda: len(deltas()) >= 2, 90, "delta files on the S3 server")

        def wrote_a_delta() -> bool:
            history = c.http.get(f"/jobs/{jid}/checkpoints").json()["history"]
            return any(h["status"] == "COMPLETED" and 0 < h["checkpointed_size"] < h["state_size"] for h in history)

        c.wait_for(wrote_a_delta, 60, "a completed incremental checkpoint")
        assert not (tmp_path / "var" / "checkpoints" / jid).exists()  # nothing on the cluster's disk
        victim = c.taskmanagers[0]
        c.replace_taskmanager(victim, slots=1)
        _, err = c.finish(run, 240)
        assert run.returncode == 0, err[-3000:]
        _exact(tmp_path, n)
        stats = c.http.get(f"/jobs/{jid}/checkpoints").json()
        assert stats["counts"]["restored"] >= 1, stats["counts"]
        assert stats["latest"]["restored"]["external_path"].startswith(f"{checkpoints}/{jid}/chk-")
        # The job finished: its checkpoints went, and with them every shared file on the store.
        s3.fs.invalidate_cache()
        assert not s3.glob(f"checkpoints/{jid}/chk-*/_metadata")
        assert not s3.glob(f"checkpoints/{jid}/shared/*")
    finally:
        c.stop()
