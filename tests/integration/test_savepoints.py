"""Savepoints on a real cluster: the CLI and REST as a user drives them, real processes, real Redis,
real SQLite, and a JobManager SIGKILL."""
from __future__ import annotations

import json
import re
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

from millstream.engine.checkpoint import state_file
from tests.integration.cluster import Cluster
from tests.integration.test_cluster_resources import _drop_database, _postgres_database

PROGRAMS = Path(__file__).parent / "programs"
RESCALED = PROGRAMS / "rescaled_count.py"
CHECKPOINTED = PROGRAMS / "checkpointed_count.py"
SLOW_COMMIT = PROGRAMS / "slow_commit.py"
KEYS = 40


def updates_of(stdout: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for line in stdout.splitlines():
        if line.startswith("["):
            key, count = json.loads(line)
            out[key].append(count)
    return out


def savepoint_path(stdout: str) -> str:
    found = re.findall(r"^Savepoint completed\. Path: (.+)$", stdout, re.M)
    assert found, stdout
    return found[-1]


def stop_midway(
    cluster: Cluster, options: tuple[str, ...], n: int, rate: int, target: Path, after: int
) -> tuple[str, str, dict[str, list[int]]]:
    """Start the count, read its output until it printed ``after`` updates, then stop it with a
    savepoint from the CLI. Returns (job id, savepoint path, every update it printed)."""
    known = cluster.job_ids()
    run = cluster.start_run(RESCALED, str(n), str(rate), options=options)
    jid = cluster.wait_new_job(known)
    seen = []
    assert run.stdout is not None
    while len(seen) < after:  # progress, not time: a loaded machine only makes the run slower
        line = run.stdout.readline()
        assert line, f"the job ended after {len(seen)} updates, before it could be stopped"
        if line.startswith("["):
            seen.append(line)
    stop = cluster.cli("stop", jid, "--savepoint-dir", str(target))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    path = savepoint_path(stop.stdout)
    # Through the same buffered file: communicate() would read the pipe underneath it and lose
    # whatever readline() had already buffered.
    out = run.stdout.read()
    err = run.stderr.read() if run.stderr else ""
    assert run.wait(120) == 0, err[-3000:]
    assert cluster.job(jid)["state"] == "FINISHED"  # stop-with-savepoint finishes the job, as in Flink
    assert (Path(path) / "_metadata").is_file()
    return jid, path, updates_of("".join(seen) + out)


def test_stop_at_2_restore_at_3_then_at_1_gives_the_uninterrupted_result(cluster: Cluster, tmp_path: Path) -> None:
    """Issue 4, test 2: every key's count goes 1..N/40 exactly once over the three runs, and the final
    counts equal those of a run that was never interrupted."""
    n, rate = 24_000, 1_500
    _, first, run1 = stop_midway(cluster, ("-p", "2"), n, rate, tmp_path / "sp", 4000)
    jid2, second, run2 = stop_midway(cluster, ("-p", "3", "--from-savepoint", first), n, rate, tmp_path / "sp", 4000)
    known = cluster.job_ids()
    last = cluster.run(RESCALED, str(n), str(rate), options=("-p", "1", "--from-savepoint", second))
    assert last.returncode == 0, last.stderr[-3000:]
    jid3 = cluster.wait_new_job(known)
    run3 = updates_of(last.stdout)

    # each run did part of the work: the stops really happened midway
    sizes = [sum(len(v) for v in run.values()) for run in (run1, run2, run3)]
    assert all(s > 0 for s in sizes) and sum(sizes) == n, sizes
    assert max(v["parallelism"] for v in cluster.job(jid2)["vertices"]) == 3
    assert max(v["parallelism"] for v in cluster.job(jid3)["vertices"]) == 1

    combined: dict[str, list[int]] = defaultdict(list)
    for run in (run1, run2, run3):
        for key, counts in run.items():
            combined[key].extend(counts)
    assert len(combined) == KEYS
    for key, counts in combined.items():
        assert sorted(counts) == list(range(1, n // KEYS + 1)), (key, len(counts))

    uninterrupted = cluster.run(RESCALED, str(n), "0", options=("-p", "2"))  # 0: no rate limit
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    final = {key: max(counts) for key, counts in combined.items()}
    assert final == {key: max(counts) for key, counts in updates_of(uninterrupted.stdout).items()}

    restored = cluster.http.get(f"/jobs/{jid3}/checkpoints").json()
    assert restored["latest"]["restored"]["external_path"] == second
    assert restored["latest"]["restored"]["is_savepoint"]
    assert Path(first).is_dir() and Path(second).is_dir()  # savepoints are never deleted
    # Issue 16: the keyed count's state went into key-grouped files (a part per key group), which the
    # rescaled subtasks above read only their key groups of, and restored exactly.
    for sp in (first, second):
        heads = [p.read_bytes()[: len(state_file.MAGIC)] for p in Path(sp).glob("*.state")]
        assert any(state_file.is_key_grouped(h) for h in heads), (sp, heads)


def test_a_trigger_id_sent_twice_takes_one_savepoint_and_the_cli_prints_its_path(cluster: Cluster, tmp_path: Path) -> None:
    known = cluster.job_ids()
    run = cluster.start_run(RESCALED, "1000000", "2000", options=("-p", "2"))
    jid = cluster.wait_new_job(known)
    try:
        cluster.wait_running(jid)
        body = {"target-directory": str(tmp_path / "twice"), "triggerId": "same-request"}
        ids = [cluster.http.post(f"/jobs/{jid}/savepoints", json=body) for _ in range(2)]
        assert [(r.status_code, r.json()) for r in ids] == [(202, {"request-id": "same-request"})] * 2
        cluster.wait_for(
            lambda: cluster.http.get(f"/jobs/{jid}/savepoints/same-request").json()["status"]["id"] == "COMPLETED",
            60, "the savepoint",
        )
        again = cluster.http.post(f"/jobs/{jid}/savepoints", json=body)
        assert again.json() == {"request-id": "same-request"}

        cli = cluster.cli("savepoint", jid, str(tmp_path / "cli"))
        assert cli.returncode == 0, cli.stderr
        path = savepoint_path(cli.stdout)
        assert Path(path).parent == tmp_path / "cli" and (Path(path) / "_metadata").is_file()
        # Checked after a later savepoint completed, not after a pause: a repeated trigger that had
        # started one would be listed (the list holds requests from the moment they are taken).
        listed = cluster.http.get(f"/jobs/{jid}/savepoints").json()["savepoints"]
        assert len(listed) == 2 and {s["status"] for s in listed} == {"COMPLETED"}
        assert len(list((tmp_path / "twice").glob("savepoint-*"))) == 1
        assert cluster.job(jid)["state"] == "RUNNING"
    finally:
        cluster.http.patch(f"/jobs/{jid}")
        run.communicate(timeout=60)


def test_a_missing_or_corrupt_savepoint_starts_nothing(cluster: Cluster, tmp_path: Path) -> None:
    known = cluster.job_ids()
    missing = cluster.run(RESCALED, "100", "0", options=("--from-savepoint", str(tmp_path / "nowhere")))
    assert missing.returncode != 0
    assert "does not exist" in missing.stderr and "(400)" in missing.stderr, missing.stderr
    corrupt = tmp_path / "savepoint-corrupt"
    corrupt.mkdir()
    (corrupt / "_metadata").write_bytes(b"\x00\x01 not json")
    bad = cluster.run(RESCALED, "100", "0", options=("--from-savepoint", str(corrupt)))
    # Refused before it is parsed: bytes this cluster did not seal (engine/checkpoint/storage.py).
    assert bad.returncode != 0 and "_metadata is not sealed" in " ".join(bad.stderr.split()), bad.stderr
    assert cluster.job_ids() == known


def test_state_no_operator_takes_is_refused_naming_it_and_accepted_when_allowed(cluster: Cluster, tmp_path: Path) -> None:
    _, path, before = stop_midway(cluster, ("-p", "2"), 8000, 1000, tmp_path / "sp", 1000)
    known = cluster.job_ids()
    refused = cluster.run(RESCALED, "8000", "0", "renamed", options=("-p", "2", "--from-savepoint", path))
    assert refused.returncode != 0
    assert "uid 'counts'" in refused.stderr and "allowNonRestoredState" in refused.stderr, refused.stderr
    assert cluster.job_ids() == known

    allowed = cluster.run(
        RESCALED, "8000", "0", "renamed",
        options=("-p", "2", "--from-savepoint", path, "--allow-non-restored-state"),
    )
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    updates = updates_of(allowed.stdout)
    # The source resumed from its saved position (its state matched by uid 'numbers'), while
    # the renamed count started from zero: the counts cover only the records after the savepoint.
    total = sum(len(v) for v in updates.values())
    assert total == 8000 - sum(len(v) for v in before.values()), total
    assert all(sorted(c) == list(range(1, len(c) + 1)) for c in updates.values())


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_checkpoint_history_survives_a_jobmanager_sigkill(tmp_path: Path, database: str) -> None:
    url = None
    if database == "postgresql":
        url = _postgres_database()
        if url is None:
            pytest.skip("no PostgreSQL reachable")
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000, database_url=url)
    try:
        c.start(taskmanagers=1, slots=2)
        known = c.job_ids()
        run = c.start_run(CHECKPOINTED, "1000000", "1000", options=("-p", "2"))
        jid = c.wait_new_job(known)
        c.wait_for(lambda: c.http.get(f"/jobs/{jid}/checkpoints").json()["counts"]["completed"] >= 3, 60, "checkpoints")
        before = c.http.get(f"/jobs/{jid}/checkpoints").json()
        done_before = {h["id"] for h in before["history"] if h["status"] == "COMPLETED"}
        c.jobmanager.send_signal(signal.SIGKILL)
        c.jobmanager.wait()
        c.start_jobmanager()
        after = c.http.get(f"/jobs/{jid}/checkpoints").json()
        # the history from before the kill, from SQL; Flink's would start empty
        assert done_before <= {h["id"] for h in after["history"]}, (done_before, after["history"])
        assert after["counts"]["completed"] >= before["counts"]["completed"]
        assert after["counts"]["restored"] == 0  # the job's running tasks were adopted (issue 18), not restored
        c.http.patch(f"/jobs/{jid}")
        c.wait_state(jid, ("CANCELED",), 60)
        run.communicate(timeout=60)
        at_end = c.http.get(f"/jobs/{jid}/checkpoints").json()

        # a terminal job's history after another restart: served from SQL alone
        c.jobmanager.send_signal(signal.SIGTERM)
        c.jobmanager.wait(20)
        c.start_jobmanager()
        final = c.http.get(f"/jobs/{jid}/checkpoints")
        assert final.status_code == 200, final.text
        assert final.json()["counts"] == at_end["counts"]
        assert [h["id"] for h in final.json()["history"]] == [h["id"] for h in at_end["history"]]
        assert final.json()["latest"]["completed"] == at_end["latest"]["completed"]
    finally:
        c.stop()
        if url:
            _drop_database(url)


def test_a_stop_with_savepoint_the_jobmanager_died_in_finishes_after_its_restart(tmp_path: Path) -> None:
    """The stop's savepoint completed, but the JobManager was SIGKILLed while the job's sink still
    committed it. The restarted JobManager must not resume the job: it restores the tasks from that
    savepoint only to end them (the sink redoes the savepoint's commit) and the job is FINISHED, with
    every record read before the stop committed exactly once and nothing read after it."""
    out = tmp_path / "out"
    out.mkdir()
    n = 1_000_000
    c = Cluster(tmp_path, heartbeat_timeout_ms=3000)
    try:
        c.start(taskmanagers=1, slots=2)
        known = c.job_ids()
        run = c.start_run(SLOW_COMMIT, str(out), str(n), "1000", "20", options=("-p", "2"))
        jid = c.wait_new_job(known)
        c.wait_running(jid)
        time.sleep(2.0)
        r = c.http.post(f"/jobs/{jid}/stop", json={"targetDirectory": str(tmp_path / "sp"), "triggerId": "stop-1"})
        assert r.status_code == 202, r.text
        c.wait_for(
            lambda: c.http.get(f"/jobs/{jid}/savepoints/stop-1").json()["status"]["id"] == "COMPLETED",
            60, "the stop's savepoint",
        )
        assert c.job(jid)["state"] == "RUNNING"  # the sink is still committing (20 s)
        c.jobmanager.send_signal(signal.SIGKILL)
        c.jobmanager.wait()
        c.start_jobmanager()
        c.wait_state(jid, ("FINISHED",), 90)
        run.communicate(timeout=60)
        committed: list[int] = []
        for f in out.glob("*.txt"):
            committed.extend(int(x) for x in f.read_text().split())
        assert committed and len(committed) == len(set(committed)), "a record was committed twice"
        # Two source subtasks read [0, n/2) and [n/2, n) from their starts: each committed a prefix.
        for lo in (0, n // 2):
            mine = sorted(v for v in committed if lo <= v < lo + n // 2)
            assert mine == list(range(lo, lo + len(mine))), "a gap: a record read before the stop is missing"
        assert len(committed) < 20_000  # nothing was read after the stop
    finally:
        c.stop()
