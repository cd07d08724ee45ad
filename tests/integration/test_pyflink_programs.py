"""PyFlink programs on a real cluster (issue 12): keyed state in rich map/flat_map/filter/reduce,
several executions of one environment, and records and keyed state of classes the program defines,
through `millstream run` on real TaskManager processes and Redis, compared with what real PyFlink
2.3.0 printed; and such state across a stop-with-savepoint and a resume at another parallelism."""
from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conformance.harness import JOB_STATE_LINE, PROGRAMS, clean_output, compare, is_ordered, load_fixture
from tests.integration.cluster import Cluster

STATEFUL = Path(__file__).parent / "programs" / "main_class_state.py"
SENSORS = 12


@pytest.mark.parametrize(
    "name", ["x_runtime_keyed_functions_state", "x_runtime_execute_repeated", "x_runtime_main_classes"]
)
def test_program_prints_what_pyflink_printed(cluster: Cluster, name: str) -> None:
    program = PROGRAMS / f"{name}.py"
    fixture = load_fixture(name)
    assert fixture.lines is not None, f"{name} has no recorded PyFlink output"
    run = cluster.run(program, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [ln for ln in clean_output(run.stdout) if not JOB_STATE_LINE.match(ln.strip())]
    assert compare(fixture.lines, lines, is_ordered(program)) is None, "\n".join(lines)


def _updates(stdout: str) -> dict[str, list[list]]:
    out: dict[str, list[list]] = defaultdict(list)
    for line in stdout.splitlines():
        if line.startswith("["):
            row = json.loads(line)
            out[row[0]].append(row)
    return out


@pytest.mark.parametrize(("backend", "before", "after"), [("hashmap", 2, 3), ("rocksdb", 2, 1)])
def test_keyed_state_of_program_classes_survives_a_savepoint_into_a_new_submission(
    cluster: Cluster, tmp_path: Path, backend: str, before: int, after: int
) -> None:
    """The resumed job is a new submission: its classes are new objects (new cloudpickle tracker
    ids), yet the Tally and Reading objects in the savepoint come back as instances of them and
    every sensor's count goes on from where the savepoint left it."""
    n, rate = 4_800, 400
    known = cluster.job_ids()
    run = cluster.start_run(STATEFUL, str(n), str(rate), backend, options=("-p", str(before)))
    jid = cluster.wait_new_job(known)
    seen: list[str] = []
    assert run.stdout is not None
    while len(seen) < 300:
        line = run.stdout.readline()
        assert line, f"the job ended after {len(seen)} updates, before it could be stopped"
        if line.startswith("["):
            seen.append(line)
    stop = cluster.cli("stop", jid, "--savepoint-dir", str(tmp_path / "sp"))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    savepoint = re.findall(r"^Savepoint completed\. Path: (.+)$", stop.stdout, re.M)[-1]
    rest = run.stdout.read()
    assert run.wait(120) == 0, (run.stderr.read() if run.stderr else "")[-3000:]
    first = _updates("".join(seen) + rest)

    resumed = cluster.run(
        STATEFUL, str(n), str(rate), backend, options=("-p", str(after), "--from-savepoint", savepoint), timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    second = _updates(resumed.stdout)

    assert sum(map(len, first.values())) < n, "the savepoint came before the end"
    assert second, "the resumed job had work left"
    per_sensor = n // SENSORS
    for sensor in {*first, *second}:
        rows = first.get(sensor, []) + second.get(sensor, [])
        assert sorted(r[1] for r in rows) == list(range(1, per_sensor + 1)), sensor  # exactly once, in sequence
        assert all(r[4] for r in rows), f"{sensor}: state came back as other classes"
        number = int(sensor.split("-")[1])
        expected_total = sum(i % 7 for i in range(number, n, SENSORS))
        assert max(rows, key=lambda r: r[1])[2] == expected_total, sensor
    assert len({*first, *second}) == SENSORS


def test_repeated_executions_with_execute_async_on_the_cluster(cluster: Cluster) -> None:
    """Four jobs from one environment sharing a source and a map: every job's own output, once, no
    output of the print() declared before the first execute_and_collect, and four jobs FINISHED."""
    known = cluster.job_ids()
    run = cluster.run(Path(__file__).parent / "programs" / "repeated_execution.py", timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [re.sub(r"^\d+> ", "", ln) for ln in clean_output(run.stdout) if not JOB_STATE_LINE.match(ln.strip())]
    assert lines[0] == "collect 1: [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]"
    assert sorted(ln for ln in lines if ln.startswith("async ") and ln != "async done") == sorted(
        f"async {2 * x + 1}" for x in range(10)
    )
    # the async job's printed lines all reach the client before its result does
    assert lines.index("async done") > max(i for i, ln in enumerate(lines) if ln.startswith("async ") and ln != "async done")
    assert "collect 2: [12, 14, 16, 18]" in lines
    assert sorted(ln for ln in lines if ln.startswith("last ")) == sorted(f"last {x}" for x in range(10))
    assert not [ln for ln in lines if ln.startswith("pending")]
    new_jobs = cluster.job_ids() - known
    assert len(new_jobs) == 4 and all(cluster.job(j)["state"] == "FINISHED" for j in new_jobs)
