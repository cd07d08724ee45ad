"""Issue 14 item 4: running an uploaded program for its JobGraph, in real subprocesses.

The program sees none of the JobManager's secrets, nothing it forks outlives the plan
(not even a double-forked, setsid'ed grandchild), and a real JobManager with a limit of
two concurrent plans answers the rest with 429 while /overview stays fast.
"""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from millstream.backend.services.program_runner import PlanBusy, PlanLimiter, ProgramFailed, capture_job
from tests.integration.cluster import Cluster

SECRETS = {
    "MILLSTREAM_AUTH_TOKEN": "tok-123",
    "MILLSTREAM_CLUSTER_SECRET": "sec-456",
    "DATABASE_URL": "postgresql+psycopg://u:pw@db/x",
    "REDIS_URL": "redis://:pw@redis:6379/0",
    "AWS_SECRET_ACCESS_KEY": "aws-789",
}
JOB = """
from pyflink.datastream import StreamExecutionEnvironment
env = StreamExecutionEnvironment.get_execution_environment()
env.from_collection([1, 2, 3]).print()
env.execute("planned")
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_program_sees_none_of_the_jobmanagers_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    program = tmp_path / "env.py"
    program.write_text("import json, os\nraise RuntimeError('ENV' + json.dumps(dict(os.environ)))\n")
    with pytest.raises(ProgramFailed) as failed:
        capture_job(program, [], None, 30)
    seen = json.loads(str(failed.value).split("ENV", 1)[1])
    assert "PATH" in seen  # it is the program's environment, not an error message
    leaked = {k for k in seen if k in SECRETS or k.startswith("MILLSTREAM_")}
    assert not leaked, leaked
    assert not any(v in json.dumps(seen) for v in SECRETS.values())


DETACHING = """
import os, sys, time
from pathlib import Path
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # the detached grandchild: own session, parent gone
        Path({pidfile!r}).write_text(str(os.getpid()))
        time.sleep(300)
    os._exit(0)
os.wait()
{tail}
"""


@pytest.mark.parametrize("tail,outcome", [("time.sleep(300)", "timeout"), (JOB, "planned")])
def test_a_detached_grandchild_does_not_outlive_the_plan(tmp_path: Path, tail: str, outcome: str):
    pidfile = tmp_path / "grandchild.pid"
    program = tmp_path / "detach.py"
    program.write_text(DETACHING.format(pidfile=str(pidfile), tail=tail))
    started = time.monotonic()
    if outcome == "timeout":
        with pytest.raises(ProgramFailed, match="did not submit a job within 4 s"):
            capture_job(program, [], None, 4)
    else:
        assert capture_job(program, [], None, 30).job_graph.name == "planned"
    assert time.monotonic() - started < 20
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), f"grandchild {pid} survived the plan"


def test_the_limiter_refuses_at_once_rather_than_queueing():
    limiter = PlanLimiter(2)
    with limiter, limiter:
        with pytest.raises(PlanBusy):
            with limiter:
                pass
    with limiter:  # released again
        pass


@pytest.mark.integration
def test_concurrent_plans_over_the_limit_get_429_and_overview_stays_fast(tmp_path: Path):
    cluster = Cluster(tmp_path)
    cluster.env["MILLSTREAM_MAX_CONCURRENT_PLANS"] = "2"
    try:
        cluster.start_jobmanager()
        slow = "import time\ntime.sleep(8)\n" + JOB
        jar = cluster.http.post("/jars/upload", files={"jarfile": ("slow.py", slow.encode())}).json()["filename"]

        def plan(_: int) -> int:
            with httpx.Client(base_url=cluster.url, timeout=120) as http:
                return http.post(f"/jars/{jar}/plan", json={}).status_code

        with ThreadPoolExecutor(10) as pool:
            answers = pool.map(plan, range(10))
            time.sleep(1.5)  # the two admitted plans are running now
            overview_s = []
            for _ in range(5):
                t = time.monotonic()
                assert cluster.http.get("/overview").status_code == 200
                overview_s.append(time.monotonic() - t)
            statuses = sorted(answers)
        assert statuses.count(200) == 2 and statuses.count(429) == 8, statuses
        assert max(overview_s) < 3.0, overview_s  # a loaded 2-core machine; unlimited, it took 37 s
    finally:
        cluster.stop()
