"""Issue-12 API on a real cluster (2 TaskManagers, real Redis): window_all and count_window_all gather
each window whole in one subtask, sum("field") on named Rows, job parameters from get_config();
expected results are computed here, independently of the engine."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

PROGRAM = Path(__file__).parent / "programs" / "api_surface.py"
sys.path.insert(0, str(PROGRAM.parent))
CASES = ["window_all", "count_window_all", "field_name_sum", "job_parameters"]


def expected() -> dict[str, list]:
    import api_surface as prog  # the same data the program uses

    windows: dict[int, list[str]] = defaultdict(list)
    for name, ts in prog.EVENTS:
        windows[ts - ts % 1000].append(name)
    exp: dict[str, list] = {"window_all": sorted([s, len(n), sorted(n)[0]] for s, n in windows.items())}
    # count_window_all(10) over 0..99: any grouping of ten sums to a multiple... compare totals instead.
    exp["count_window_all_total"] = sum(range(100))
    running: dict[str, int] = defaultdict(int)
    first_seq: dict[str, int] = {}
    sums = []
    for key, count, seq in prog.ROWS:
        running[key] += count
        first_seq.setdefault(key, seq)
        sums.append([key, running[key], first_seq[key]])  # sum keeps the first record's other fields
    exp["field_name_sum"] = sorted(sums)
    exp["job_parameters"] = sorted([["from-config", v] for v in (1, 2, 3)])
    return exp


def _check(got: dict) -> None:
    exp = expected()
    # Every window whole in one subtask. As in PyFlink, window_all keys the stream by a constant and
    # runs at the default parallelism (Java Flink forces 1): only one of its subtasks gets records.
    assert [w[:3] for w in got["window_all"]] == exp["window_all"]
    counted = got["count_window_all"]
    assert len(counted) == 10 and sum(c[0] for c in counted) == exp["count_window_all_total"]
    assert got["field_name_sum"] == exp["field_name_sum"]
    assert got["job_parameters"] == exp["job_parameters"]


@pytest.mark.integration
def test_api_surface_on_a_cluster(cluster: Cluster) -> None:
    res = cluster.run(PROGRAM, *CASES, options=("-p", "3"), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    _check(json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("{"))))


def test_api_surface_in_process() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "millstream.backend.cli", "run", "--local", "-p", "3", str(PROGRAM), *CASES],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    _check(json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("{"))))
