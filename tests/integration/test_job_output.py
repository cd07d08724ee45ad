"""A job's print() output reaches an attached ``millstream run`` from a real 2-TaskManager cluster and
from Spark, as a local PyFlink run prints it; it is bounded in Redis and readable over REST.

The expected lines were recorded from real PyFlink 2.3.0 running the same programs
(``fixtures/printing.*.pyflink.out``). Which subtask prints a record is not fixed (Flink's rebalance
starts at a random channel, and key groups are hashed differently), so lines are compared with their
``<subtask>> `` prefix removed, as multisets, and the prefixes are checked for what they say.
"""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import redis

from millstream.engine import redis_keys
from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"
FIXTURES = Path(__file__).parent / "fixtures"
PREFIX = re.compile(r"^(?:(\w+):)?(\d+)> |^(\w+)> ")
JOB_LINE = re.compile(r"^Job ([0-9a-f]{32}) (\w+)$")


def program_lines(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if not JOB_LINE.match(ln)]


def unprefixed(line: str) -> str:
    m = PREFIX.match(line)
    if not m:
        return line
    ident = m.group(1) or m.group(3)
    return (f"{ident}> " if ident else "") + line[m.end():]


def job_id(stdout: str) -> str:
    return next(m.group(1) for ln in stdout.splitlines() if (m := JOB_LINE.match(ln)))


def test_attached_run_prints_the_jobs_output_as_pyflink_does(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "printing.py", "streaming", options=("-p", "2"))
    assert res.returncode == 0, res.stderr
    got = program_lines(res.stdout)
    expected = (FIXTURES / "printing.streaming.pyflink.out").read_text().splitlines()
    assert Counter(map(unprefixed, got)) == Counter(map(unprefixed, expected))
    # Complete before execute() returned, as in a local run.
    assert got[-1] == "after execute"
    # Both print subtasks printed, each in its own input order.
    by_subtask: dict[str, list[int]] = {}
    for line in got:
        m = re.match(r"^([12])> (\d+)$", line)
        if m:
            by_subtask.setdefault(m.group(1), []).append(int(m.group(2)))
    assert set(by_subtask) == {"1", "2"}
    for values in by_subtask.values():
        assert values == sorted(values)
    # The TaskManagers still print them too (Flink's .out).
    logs = "".join((cluster.workdir / f"taskmanager-{i}.log").read_text(errors="replace") for i in range(2))
    assert "map saw 150" in logs and re.search(r"^[12]> 1990$", logs, re.M)

    # And the REST API serves the same lines.
    body = cluster.http.get(f"/jobs/{job_id(res.stdout)}/stdout").json()
    assert body["ended"] and body["dropped"] == 0 and body["total"] == len(got) - 1
    assert Counter(body["lines"]) == Counter(got[:-1])


def test_a_detached_jobs_output_is_capped_and_the_drop_is_counted(cluster: Cluster) -> None:
    n = 110_000  # the job prints more lines than the cap keeps
    res = cluster.run(PROGRAMS / "printing.py", "streaming", str(n), options=("-p", "2", "--detached"))
    assert res.returncode == 0, res.stderr
    jid = job_id(res.stdout)
    cluster.wait_state(jid, ("FINISHED",), 180)
    client = redis.Redis.from_url(cluster.redis_url)
    assert client.llen(redis_keys.job_stdout(jid)) == redis_keys.JOB_STDOUT_MAX_LINES
    assert 0 < client.ttl(redis_keys.job_stdout(jid)) <= redis_keys.JOB_STDOUT_TTL_S
    body = cluster.http.get(f"/jobs/{jid}/stdout", params={"offset": 0, "maxLines": 10}).json()
    total = body["total"]
    assert total == n + n // 50 + n // 40  # map values, "map saw" lines, one rolling sum per 40th value
    assert body["dropped"] == total - redis_keys.JOB_STDOUT_MAX_LINES == body["offset"]
    assert len(body["lines"]) == 10
    tail = cluster.http.get(f"/jobs/{jid}/stdout", params={"offset": total - 3}).json()
    assert tail["dropped"] == 0 and len(tail["lines"]) == 3 and tail["next-offset"] == total


@pytest.mark.skipif(importlib.util.find_spec("pyspark") is None, reason="needs pyspark")
def test_a_batch_job_on_spark_prints_what_pyflink_prints_in_batch_mode(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "printing.py", "batch", timeout=300)
    assert res.returncode == 0, res.stderr
    jid = job_id(res.stdout)
    assert cluster.job(jid)["job-type"] == "BATCH" and "spark" in cluster.job(jid)
    got = program_lines(res.stdout)
    expected = (FIXTURES / "printing.batch.pyflink.out").read_text().splitlines()
    # Prefixes included: Flink's adaptive batch scheduler runs these small print sinks as one subtask.
    assert Counter(got) == Counter(expected)
    assert got[-1] == "after execute"


def test_user_metrics_are_reported_over_rest(cluster: Cluster) -> None:
    n = 20_000
    res = cluster.run(PROGRAMS / "user_metrics.py", str(n), options=("-p", "2"))
    assert res.returncode == 0, res.stderr
    jid = job_id(res.stdout)
    job = cluster.wait_state(jid, ("FINISHED",), 60)
    assert job["duration"] < 60_000  # the meter's span: its rate is then events / 60 s
    (vertex,) = [v for v in job["vertices"] if "Map" in v["name"]]
    base = f"/jobs/{jid}/vertices/{vertex['id']}"

    listed = {m["id"] for m in cluster.http.get(f"{base}/subtasks/metrics").json()}
    assert {"Map.my_group.events", "Map.my_group.events_rate", "Map.my_group.last"} <= listed
    agg = cluster.http.get(
        f"{base}/subtasks/metrics", params={"get": "Map.my_group.events,Map.my_group.events_rate,Map.my_group.last"}
    ).json()
    by_id = {m["id"]: m for m in agg}
    assert by_id["Map.my_group.events"]["sum"] == n
    assert by_id["Map.my_group.events"]["min"] > 0  # both subtasks counted
    assert by_id["Map.my_group.events_rate"]["sum"] == pytest.approx(n / 60)
    assert by_id["Map.my_group.last"]["max"] == n

    ids = ",".join(f"{i}.Map.my_group.{name}" for i in (0, 1) for name in ("events", "kind.even.values"))
    values = {m["id"]: m["value"] for m in cluster.http.get(f"{base}/metrics", params={"get": ids}).json()}
    assert int(values["0.Map.my_group.events"]) + int(values["1.Map.my_group.events"]) == n
    counts = [int(re.search(r"count=(\d+)", values[f"{i}.Map.my_group.kind.even.values"]).group(1)) for i in (0, 1)]
    assert sum(counts) == n // 2
    one = cluster.http.get(f"{base}/subtasks/0/metrics", params={"get": "Map.my_group.events"}).json()
    assert one == [{"id": "Map.my_group.events", "value": values["0.Map.my_group.events"]}]
    assert cluster.http.get(f"{base}/subtasks/7/metrics").status_code == 404


def test_user_metrics_are_live_while_the_job_runs(cluster: Cluster) -> None:
    n, rate = 30_000, 2_000  # about 15 s
    known = cluster.job_ids()
    run = cluster.start_run(PROGRAMS / "user_metrics.py", str(n), str(rate), options=("-p", "2"))
    try:
        jid = cluster.wait_new_job(known)
        job = cluster.wait_running(jid)
        (vertex,) = [v for v in job["vertices"] if "Map" in v["name"]]
        path = f"/jobs/{jid}/vertices/{vertex['id']}/subtasks/metrics"
        seen: list[float] = []

        def counting() -> bool:
            got = cluster.http.get(path, params={"get": "Map.my_group.events", "agg": "sum"}).json()
            if got and cluster.job(jid)["state"] == "RUNNING":
                seen.append(got[0]["sum"])
            return len(set(seen)) >= 2  # two different counts while it runs

        cluster.wait_for(counting, 30, "the counter to be reported twice while the job runs")
        assert 0 < seen[-1] < n
    finally:
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_an_in_process_run_prints_what_pyflink_prints(mode: str) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "millstream.backend.cli", "run", "--local", str(PROGRAMS / "printing.py"), mode],
        capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    got = res.stdout.splitlines()
    expected = (FIXTURES / f"printing.{mode}.pyflink.out").read_text().splitlines()
    normalise = unprefixed if mode == "streaming" else str  # BATCH: one print subtask, no prefix
    assert Counter(map(normalise, got)) == Counter(map(normalise, expected))
    assert got[-1] == "after execute"


def test_a_batch_job_on_the_native_runtime_prints_without_subtask_prefixes(cluster: Cluster) -> None:
    res = cluster.run(PROGRAMS / "printing.py", "batch", options=("--engine", "native"))
    assert res.returncode == 0, res.stderr
    got = program_lines(res.stdout)
    assert Counter(got) == Counter((FIXTURES / "printing.batch.pyflink.out").read_text().splitlines())
