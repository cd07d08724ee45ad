"""Redis connections stay flat on a long-lived cluster (issue 13, item 6): before, every task's
channels took connections from its slot's pool and never gave them back, so after ~48 jobs at
parallelism 4 (or ~60 restarts) every task failed with MaxConnectionsError while the TaskManagers
looked healthy. Counted on the test's own Redis (CLIENT LIST)."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Iterator

import pytest
import redis

from tests.integration.cluster import Cluster

PROGRAMS = Path(__file__).parent / "programs"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c.start(taskmanagers=2, slots=2)
    finally:
        c.stop()


def _connections(c: Cluster) -> int:
    r = redis.Redis.from_url(c.redis_url)
    try:
        return len(r.client_list()) - 1  # not this one
    finally:
        r.close()


# Pools keep idle connections for reuse, as many as a process ever used at once (two jobs overlap in a
# slot while one ends and the next starts), so the count may step up a little and then stays; a leak
# adds two per task: ~1,200 over 150 jobs.
SLACK = 8


def _settled(c: Cluster) -> int:
    """The connection count once idle connections of ended tasks are back (taken over a few samples,
    the lowest: a heartbeat or metrics write may be opening one at the moment of a sample)."""
    samples = []
    for _ in range(5):
        samples.append(_connections(c))
        time.sleep(0.2)
    return min(samples)


# A leak adds two connections per task, so the short variants (`make test`) show one far past SLACK;
# the long ones (`make bench`) go past where the leak used to fail every task.
@pytest.mark.parametrize("jobs", [30, pytest.param(150, marks=pytest.mark.full)])
def test_jobs_in_a_row_at_parallelism_4_keep_the_connection_count_flat(cluster: Cluster, jobs: int) -> None:
    warm = cluster.run(PROGRAMS / "many_jobs.py", "10", "4", timeout=300)
    assert warm.returncode == 0, warm.stderr[-3000:]
    before = _settled(cluster)
    res = cluster.run(PROGRAMS / "many_jobs.py", str(jobs), "4", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]  # before the fix: MaxConnectionsError after ~48 jobs
    assert len(re.findall(r"^done \d+$", res.stdout, re.M)) == jobs
    after = _settled(cluster)
    assert after <= before + SLACK, (before, after)


@pytest.mark.parametrize("restarts", [20, pytest.param(100, marks=pytest.mark.full)])
def test_a_job_that_restarts_many_times_keeps_the_connection_count_flat(cluster: Cluster, restarts: int) -> None:
    warm = cluster.run(PROGRAMS / "restarting.py", "5", "4", timeout=300)  # pools reach their working size
    assert warm.returncode == 0, warm.stderr[-3000:]
    before = _settled(cluster)
    res = cluster.run(PROGRAMS / "restarting.py", str(restarts), "4", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "finished" in res.stdout
    jid = re.findall(r"^Job ([0-9a-f]{32}) ", res.stdout, re.M)[0]
    job = cluster.job(jid)
    assert job["state"] == "FINISHED"
    subtasks = [
        st for v in job["vertices"] for st in cluster.http.get(f"/jobs/{jid}/vertices/{v['id']}").json()["subtasks"]
    ]
    assert {st["attempt"] for st in subtasks} == {restarts}
    after = _settled(cluster)
    assert after <= before + SLACK, (before, after)
