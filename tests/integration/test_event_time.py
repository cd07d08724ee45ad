"""Event time, windows and timers on a real cluster at parallelism 1 and 4, against results
computed here independently of the engine's window code."""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

PROGRAM = Path(__file__).parent / "programs" / "event_time.py"
sys.path.insert(0, str(PROGRAM.parent))
import event_data  # noqa: E402

CASES = ["tumbling", "sliding", "session", "late", "count", "timers"]


def floor(ts: int, size: int) -> int:
    return ts - ts % size  # Python's % floors, like Flink's window start for negatives


def expected() -> dict[str, list]:
    exp: dict[str, list] = {}
    tumbling: dict[tuple, int] = defaultdict(int)
    for k, ts, v in event_data.EVENTS:
        tumbling[(k, floor(ts, 1000))] += v
    exp["tumbling"] = sorted([k, s, s + 1000, v] for (k, s), v in tumbling.items())

    sliding: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for k, ts, v in event_data.EVENTS:
        start = floor(ts, 500)
        while start > ts - 2000:
            acc = sliding[(k, start)]
            acc[0] += 1
            acc[1] += v
            start -= 500
    exp["sliding"] = sorted([k, s, s + 2000, [c, t]] for (k, s), (c, t) in sliding.items())

    sessions = []
    by_key: dict[str, list] = defaultdict(list)
    for k, ts, v in event_data.SESSION_EVENTS:
        by_key[k].append((ts, v))
    for k, evs in by_key.items():
        evs.sort()
        group = [evs[0]]
        for ts, v in evs[1:]:
            if ts - group[-1][0] > 300:  # a window [t, t+gap) merges with one starting at <= t+gap
                sessions.append([k, group[0][0], group[-1][0] + 300, len(group), sum(x for _, x in group)])
                group = []
            group.append((ts, v))
        sessions.append([k, group[0][0], group[-1][0] + 300, len(group), sum(x for _, x in group)])
    exp["session"] = sorted(sessions)

    on_time = event_data.LATE_EVENTS[:3000]
    counts: dict[tuple, int] = defaultdict(int)
    for k, ts, _ in on_time:
        counts[(k, floor(ts, 1000) + 1000)] += 1
    late = [["late", k, ts, v] for k, ts, v in event_data.LATE_EVENTS[3000:]]
    exp["late"] = sorted([["main", k, end, c] for (k, end), c in counts.items()] + late)

    per_key: dict[str, list[int]] = defaultdict(list)
    count_out = []
    for k, v in event_data.COUNT_EVENTS:
        per_key[k].append(v)
        seen = per_key[k]
        if len(seen) % 3 == 0:
            count_out.append(["tumbling", k, sum(seen[-3:])])
        if len(seen) >= 4 and len(seen) % 2 == 0:  # PyFlink's count_window(4, 2): each full window once
            count_out.append(["sliding", k, sum(seen[-4:])])
    exp["count"] = sorted(count_out)

    buckets: dict[tuple, int] = defaultdict(int)
    for k, ts, _ in event_data.EVENTS:
        buckets[(k, floor(ts, 1000))] += 1
    exp["timers"] = sorted([k, b, c] for (k, b), c in buckets.items())
    return exp


EXPECTED = expected()


@pytest.mark.parametrize("parallelism", [1, 2, 4])
def test_event_time_cases_match_reference(cluster: Cluster, parallelism: int) -> None:
    res = cluster.run(PROGRAM, *CASES, options=("-p", str(parallelism)), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("{")))
    for case in CASES:
        assert got[case] == EXPECTED[case], case


def test_event_time_cases_run_in_process() -> None:
    import subprocess

    res = subprocess.run(
        [sys.executable, "-m", "millstream.backend.cli", "run", "--local", "-p", "2", str(PROGRAM), *CASES],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("{")))
    for case in CASES:
        assert got[case] == EXPECTED[case], case
