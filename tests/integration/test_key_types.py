"""Equal keys land in the same key group everywhere: the key-type program (ints, floats, bools,
Decimals, tuples and namedtuples, lists (and a list and a tuple of the same elements, which are one
key), frozensets, dataclasses, enums, datetimes, Row, a class with the
``__millstream_key__`` hook, each key arriving in several equal forms) gives the same per-key counts
at parallelism 1, 2 and 4, on a real cluster whose every process has its own PYTHONHASHSEED and in
process; a key with no stable encoding fails its job with a message naming the type and the fix,
and the cluster carries on."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

PROGRAM = Path(__file__).parent / "programs" / "key_types.py"
ROOT = Path(__file__).resolve().parents[2]
TASKMANAGERS = 4  # one slot each, so at parallelism 4 every subtask is a process of its own TaskManager


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("key-types"))
    try:
        c.env["PYTHONHASHSEED"] = "101"  # the JobManager
        c.start_jobmanager()
        for i in range(TASKMANAGERS):
            c.env["PYTHONHASHSEED"] = str(202 + i)  # a different seed in every TaskManager and its slots
            c.start_taskmanager(slots=1)
        c.env["PYTHONHASHSEED"] = "999"  # the client (millstream run)
        c.wait_for(lambda: c.overview()["taskmanagers"] >= TASKMANAGERS, 60, "TaskManagers to register")
        yield c
    finally:
        c.stop()


def _result(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, stdout
    return json.loads(lines[-1])


def _check(result: dict) -> dict:
    counts, expected = result["counts"], result["expected"]
    wrong = {k: (counts.get(k), n) for k, n in expected.items() if counts.get(k) != n}
    assert not wrong, f"per-key counts differ from the expected ones (got, want): {wrong}"
    assert set(counts) == set(expected)
    return counts


def test_the_same_per_key_counts_on_the_cluster_and_in_process_at_1_2_and_4(cluster):
    results = {}
    for parallelism in (1, 2, 4):
        r = cluster.run(PROGRAM, str(parallelism), timeout=240)
        assert r.returncode == 0, r.stdout + r.stderr
        results[("cluster", parallelism)] = _check(_result(r.stdout))
        env = dict(os.environ, PYTHONHASHSEED=str(7 * parallelism), PYTHONPATH=str(ROOT))
        env.pop("REDIS_URL", None)
        r = subprocess.run(
            [sys.executable, str(PROGRAM), str(parallelism)], env=env, capture_output=True, text=True, timeout=240, cwd=ROOT
        )
        assert r.returncode == 0, r.stdout + r.stderr
        results[("in-process", parallelism)] = _check(_result(r.stdout))
    first = next(iter(results.values()))
    assert all(counts == first for counts in results.values())
    # Every family of key types took part (the program's labels are family:index).
    assert {label.split(":")[0] for label in first} == {
        "int", "half", "str", "bytes", "tuple", "list", "listtuple", "frozenset", "mixed", "dataclass", "enum", "datetime", "date",
        "time", "decimal", "row", "money", "none",
    }


def test_a_key_without_a_stable_encoding_fails_its_job_clearly_and_the_cluster_carries_on(cluster):
    known = cluster.job_ids()
    r = cluster.run(PROGRAM, "2", "refuse", timeout=240)
    assert r.returncode != 0
    output = r.stdout + r.stderr
    assert "key of type __main__.Plain has no stable encoding" in output, output
    assert "__millstream_key__" in output
    (jid,) = cluster.job_ids() - known
    assert cluster.job(jid)["state"] == "FAILED"
    exceptions = cluster.http.get(f"/jobs/{jid}/exceptions").json()
    assert "has no stable encoding" in json.dumps(exceptions)
    # Nothing else went down: every TaskManager is still there and the next job runs.
    assert cluster.overview()["taskmanagers"] == TASKMANAGERS
    assert all(p.poll() is None for p in cluster.taskmanagers)
    r = cluster.run(PROGRAM, "4", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    _check(_result(r.stdout))


def test_the_same_per_key_counts_from_spark_in_batch_mode(cluster):
    # A bounded job in BATCH mode runs on Spark, whose shuffle routes by the same key groups.
    known = cluster.job_ids()
    r = cluster.run(PROGRAM, "2", "batch", timeout=480)
    assert r.returncode == 0, r.stdout + r.stderr
    _check(_result(r.stdout))
    (jid,) = cluster.job_ids() - known
    job = cluster.job(jid)
    assert job["job-type"] == "BATCH" and "spark" in json.dumps(job).lower()
