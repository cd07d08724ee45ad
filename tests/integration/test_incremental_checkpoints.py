"""Incremental checkpoints on real processes (issue 16): a job on either backend restored from a
chain of base + deltas after a TaskManager SIGKILL, with exact output; and shared state files never
deleted while a retained checkpoint refers to them, also across a SIGKILL of the JobManager."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster
from tests.integration.test_recovery import committed_counts

PROGRAM = Path(__file__).parent / "programs" / "incremental_count.py"
KEYS = 5000


def _metadata(chk: Path) -> dict | None:
    """A completed checkpoint's _metadata (sealed: a version byte and a 16-byte tag before the JSON)."""
    try:
        data = (chk / "_metadata").read_bytes()
    except OSError:
        return None
    return json.loads(data[17:] if data[:1] != b"{" else data)


def _references(meta: dict) -> set[str]:
    return {n for o in meta["operators"] for s in o["subtasks"] for n in s.get("shared", ())}


class SharedFileWatch:
    """Polls the job's checkpoint directory: every completed checkpoint's shared files must exist
    while the checkpoint does (retention deletes a checkpoint's directory before its files)."""

    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir
        self.violations: list[str] = []
        self.max_deltas_seen = 0  # the longest chain of deltas a completed checkpoint referred to
        # checkpoint id -> the partial bases (rolled compaction) it referred to: a checkpoint's second
        # file, after its delta, named <operator>-<id>-<uuid>-1.base
        self.partial_bases: dict[int, int] = {}
        self.references: dict[int, set[str]] = {}  # checkpoint id -> the shared files it referred to
        self.checks = 0
        self.text_columns = False  # a shared file holding text columns (string_columns) was seen
        self._read: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "SharedFileWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            for chk in sorted(self.job_dir.glob("chk-*")):
                meta = _metadata(chk)
                if meta is None:
                    continue
                refs = _references(meta)
                missing = [n for n in refs if not (self.job_dir / "shared" / n).is_file()]
                if missing and (chk / "_metadata").is_file():  # still retained: a real violation
                    self.violations.append(f"{chk.name} refers to deleted {missing}")
                self.checks += 1
                deltas = [n for n in refs if n.endswith(".delta")]
                self.max_deltas_seen = max(self.max_deltas_seen, len(deltas))
                self.partial_bases[int(chk.name.split("-")[1])] = sum(n.endswith("-1.base") for n in refs)
                self.references[int(chk.name.split("-")[1])] = refs
                for n in refs - self._read:
                    self._read.add(n)
                    try:
                        self.text_columns |= b"millstream.text-columns/1" in (self.job_dir / "shared" / n).read_bytes()
                    except OSError:
                        pass


def _start(c: Cluster, tmp_path: Path, n: int, rate: int, backend: str = "rocksdb") -> tuple[subprocess.Popen, str, Path]:
    checkpoints = tmp_path / "checkpoints"
    backend, _, keys = backend.partition("-")  # "hashmap-logged": int keys, logged as columns
    if keys == "whole":  # the heap backend's whole checkpoints built from the changes (string keys)
        backend, keys = "hashmap-whole", ""
    run = subprocess.Popen(
        [sys.executable, "-m", "millstream.backend.cli", "run", "-p", "2", str(PROGRAM), str(n), str(rate), str(KEYS),
         str(tmp_path / "out"), str(checkpoints), backend, "int" if keys == "logged" else "str"],
        env=c.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    c.wait_for(lambda: c.http.get("/jobs/overview").json()["jobs"], 60, "the job to be submitted")
    jid = c.http.get("/jobs/overview").json()["jobs"][0]["jid"]
    return run, jid, checkpoints / jid


def _wait_for_a_delta_chain(c: Cluster, watch: SharedFileWatch, jid: str) -> None:
    c.wait_for(lambda: watch.max_deltas_seen >= 2, 90, "a completed checkpoint referring to two deltas")


def _kill_a_taskmanager_and_finish(c: Cluster, run: subprocess.Popen) -> None:
    """SIGKILL the first TaskManager, start another, and wait for the job to finish (restored)."""
    victim = c.taskmanagers[0]
    c.replace_taskmanager(victim, slots=1)
    _, err = run.communicate(timeout=240)
    assert run.returncode == 0, err[-3000:]


def _exact(tmp_path: Path, n: int) -> None:
    written = committed_counts(tmp_path / "out")
    assert sorted(written) == sorted(f"k{i}" for i in range(KEYS))
    bad = {k: v for k, v in written.items() if sorted(v) != list(range(1, n // KEYS + 1))}
    assert not bad, {k: (len(v), len(set(v))) for k, v in list(bad.items())[:5]}


@pytest.mark.parametrize("backend", ["rocksdb", "hashmap", "hashmap-logged", "hashmap-objects"])
def test_a_job_restores_from_an_incremental_chain_after_a_taskmanager_kill(tmp_path: Path, backend: str) -> None:
    """``hashmap-logged`` and ``hashmap-objects``: the heap tables keep change logs from their first cut
    on (engine/runtime/state/change_log.py, which otherwise waits for 65,536 keys), of columns (int
    keys) and of the batches' objects (string keys, ``(str, int)`` values); the latter's bases are written
    as text columns (engine/runtime/state/string_columns.py, which otherwise waits for frames of 512
    entries) and read back in the restore."""
    n = 100_000
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    if backend.startswith("hashmap-"):
        c.env["MILLSTREAM_CHANGE_LOG_MIN_KEYS"] = "0"
        c.env["MILLSTREAM_TEXT_COLUMNS_MIN_ENTRIES"] = "0"
    try:
        c.start(taskmanagers=2, slots=1)
        run, jid, job_dir = _start(c, tmp_path, n, 4000, backend)
        with SharedFileWatch(job_dir) as watch:
            _wait_for_a_delta_chain(c, watch, jid)
            # A savepoint of the same job stays self-contained: a full snapshot, no shared file.
            body = {"target-directory": str(tmp_path / "savepoints"), "triggerId": "sp"}
            assert c.http.post(f"/jobs/{jid}/savepoints", json=body).status_code == 202
            c.wait_for(lambda: c.http.get(f"/jobs/{jid}/savepoints/sp").json()["status"]["id"] == "COMPLETED", 60, "the savepoint")
            (savepoint,) = (tmp_path / "savepoints").glob("savepoint-*")
            meta = _metadata(savepoint)
            assert meta is not None and _references(meta) == set()
            # A failover restores the latest completed checkpoint or savepoint: kill once a checkpoint
            # after the savepoint completed with a partial base (rolled compaction) in its chain, so that
            # such a chain is what is restored (checked below).
            sp = c.http.get(f"/jobs/{jid}/checkpoints").json()["latest"]["savepoint"]["id"]
            c.wait_for(lambda: any(count for i, count in list(watch.partial_bases.items()) if i > sp), 90, "a checkpoint after the savepoint with a partial base")
            _kill_a_taskmanager_and_finish(c, run)
        assert not watch.violations, watch.violations[:3]
        _exact(tmp_path, n)
        stats = c.http.get(f"/jobs/{jid}/checkpoints").json()
        assert stats["counts"]["restored"] >= 1, stats["counts"]
        # the (last) restore was of a checkpoint whose chains held a partial base, and the output above is
        # exact: once a chain has one it keeps one (a partial base goes when newer ones replace it)
        restored = stats["latest"]["restored"]["id"]
        assert restored > sp and watch.partial_bases.get(restored), (restored, sp, watch.partial_bases)
        assert watch.text_columns == (backend == "hashmap-objects")
        # What a delta costs: the checkpointed size (new bytes) of some checkpoint is below its full size.
        sizes = [(h["checkpointed_size"], h["state_size"]) for h in stats["history"] if h["status"] == "COMPLETED"]
        assert any(0 < new < full for new, full in sizes), sizes
        # The job finished: its checkpoints went (no retention asked for), the savepoint stays whole.
        assert not list(job_dir.glob("chk-*/_metadata"))
        # ... and with them every shared file, also those the killed TaskManager wrote and never
        # acknowledged (swept at the failover) and any it left half-written.
        assert sorted(p.name for p in (job_dir / "shared").iterdir()) == []
        assert (savepoint / "_metadata").is_file() and list(savepoint.glob("*.state"))
    finally:
        c.stop()


def test_whole_heap_checkpoints_built_from_the_changes_restore_after_a_taskmanager_kill(tmp_path: Path) -> None:
    """``state.backend.hashmap.full-checkpoints-from-changes`` (checkpoints not incremental): every
    checkpoint refers to one whole file per subtask, none shared with another checkpoint (each was
    merged on the writer thread from the previous one and the keys changed since), every one holds the
    whole state (its checkpointed size is its full size), and a restore after a SIGKILL is exact."""
    n = 100_000
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    c.env["MILLSTREAM_CHANGE_LOG_MIN_KEYS"] = "0"
    c.env["MILLSTREAM_TEXT_COLUMNS_MIN_ENTRIES"] = "0"
    try:
        c.start(taskmanagers=2, slots=1)
        run, jid, job_dir = _start(c, tmp_path, n, 4000, "hashmap-whole")
        with SharedFileWatch(job_dir) as watch:
            c.wait_for(lambda: len(watch.references) >= 4, 90, "four completed checkpoints")
            _kill_a_taskmanager_and_finish(c, run)
        assert not watch.violations, watch.violations[:3]
        _exact(tmp_path, n)
        for cid, refs in list(watch.references.items()):
            # one whole base per subtask of the keyed operator, no delta, no file of another checkpoint
            assert len(refs) == 2 and all(r.endswith(".base") and f"-{cid}-" in r for r in refs), (cid, refs)
        stats = c.http.get(f"/jobs/{jid}/checkpoints").json()
        assert stats["counts"]["restored"] >= 1, stats["counts"]
        sizes = [(h["checkpointed_size"], h["state_size"]) for h in stats["history"] if h["status"] == "COMPLETED"]
        assert sizes and all(new == full for new, full in sizes), sizes
        assert watch.text_columns  # the merged files hold the string keys as text columns
        assert sorted(p.name for p in (job_dir / "shared").iterdir()) == []
    finally:
        c.stop()


def test_shared_files_survive_while_referenced_across_a_jobmanager_kill(tmp_path: Path) -> None:
    n = 100_000
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    try:
        c.start(taskmanagers=2, slots=1)
        run, jid, job_dir = _start(c, tmp_path, n, 4000)
        with SharedFileWatch(job_dir) as watch:
            _wait_for_a_delta_chain(c, watch, jid)
            before = {p.name for p in job_dir.glob("chk-*") if (p / "_metadata").is_file()}
            c.jobmanager.send_signal(signal.SIGKILL)
            c.jobmanager.wait()
            time.sleep(1.0)
            c.start_jobmanager()
            # Retention resumes after the restart: the checkpoints retained before it are deleted
            # once newer ones complete, and with them the files only they referred to.
            c.wait_for(
                lambda: not before & {p.name for p in job_dir.glob("chk-*")}, 120, "the pre-restart checkpoints to be subsumed"
            )
            out, err = run.communicate(timeout=240)
        assert run.returncode == 0, err[-3000:]
        assert not watch.violations, watch.violations[:3]
        assert watch.checks > 10
        _exact(tmp_path, n)
        # The restarted JobManager adopted the running tasks (issue 18): their delta chains went on.
        assert c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["restored"] == 0
    finally:
        c.stop()
