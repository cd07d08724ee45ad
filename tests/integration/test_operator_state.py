"""Timers and windows on a real cluster across stop-with-savepoint: stopped without drain at
parallelism 2 and resumed at 3, the output is exactly an uninterrupted run's (timers and per-window
state moved by key group, source splits redistributed); stopped with drain, event time ends and
every window fires before the job finishes."""
from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

PROGRAM = Path(__file__).parent / "programs" / "rescaled_timers.py"
# 15 s of input at full speed (on a slow 2-core machine the stop came 6 s after the job ran: the CLI
# starting up); 30 s of event time
N, RATE = 6000, 400


def _expected() -> Counter:
    per: Counter = Counter((i % 7, (i * 5) // 1000) for i in range(N))
    return Counter({(kind, k, sec, c): 1 for (k, sec), c in per.items() for kind in ("timer", "window")})


def _results(stdout: str) -> Counter:
    return Counter(tuple(json.loads(line)) for line in stdout.splitlines() if line.startswith("["))


def _stop(cluster: Cluster, options: tuple[str, ...], target: Path, drain: bool) -> tuple[str, str, Counter]:
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAM, str(N), str(RATE), options=options)
    jid = cluster.wait_new_job(known)
    cluster.wait_running(jid)
    time.sleep(2.5)
    stop = cluster.cli("stop", jid, "--savepoint-dir", str(target), *(("--drain",) if drain else ()))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    path = re.findall(r"^Savepoint completed\. Path: (.+)$", stop.stdout, re.M)[-1]
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err[-3000:]
    assert cluster.job(jid)["state"] == "FINISHED"
    return jid, path, _results(out)


def test_stop_without_drain_at_2_and_resume_at_3_keeps_timers_and_windows(cluster: Cluster, tmp_path: Path) -> None:
    _, savepoint, first = _stop(cluster, ("-p", "2"), tmp_path / "sp", drain=False)
    assert 0 < sum(first.values()) < sum(_expected().values()), "the stop came midway"
    # Without drain nothing fired early: every result of the first run is a whole second.
    assert not (first - _expected())
    known = cluster.job_ids()
    rest = cluster.run(PROGRAM, str(N), str(RATE), options=("-p", "3", "--from-savepoint", savepoint))
    assert rest.returncode == 0, rest.stderr[-3000:]
    jid = cluster.wait_new_job(known)
    assert max(v["parallelism"] for v in cluster.job(jid)["vertices"]) == 3
    assert first + _results(rest.stdout) == _expected()


def test_stop_with_drain_fires_every_open_window_and_timer(cluster: Cluster, tmp_path: Path) -> None:
    _, _, out = _stop(cluster, ("-p", "2"), tmp_path / "sp-drain", drain=True)
    # The second source subtask reads event time from 15 s on; the first holds the watermark far
    # below that. Only the end of event time fires the seconds from 15 on before the job ends.
    assert any(r[2] >= 15 for r in out if r[0] == "timer") and any(r[2] >= 15 for r in out if r[0] == "window")
    assert sum(out.values()) < sum(_expected().values()), "the stop came before the end of the input"
    assert max(out.values()) == 1
