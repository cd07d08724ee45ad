"""Issue 14, hole 4: what an uploaded program can reach of the secrets of the processes above it.

The plan step (run by the JobManager) and the job's functions (run by a TaskManager's slot) walk their
ancestors in /proc. JobManager and TaskManager are non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``: its ``/proc/<pid>/mem`` cannot be opened
by a same-user process) and blanks its secret variables in the environment block it was started with
(what ``/proc/<pid>/environ`` shows, even to root). As root the kernel lets anything with
CAP_SYS_PTRACE read any process, so the JobManager is then started without that capability (as a
non-root JobManager is), which is what a same-user child faces.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.integration.cluster import Cluster

pytestmark = pytest.mark.integration

NAMES = ("MILLSTREAM_CLUSTER_SECRET", "MILLSTREAM_AUTH_TOKEN", "DATABASE_URL", "REDIS_URL")

# What a program's code can see of the secrets: its own environment, and each ancestor's /proc environ
# and mem. One function text, embedded by both programs below (the plan step and a job's map function).
SNOOP = """
def snoop(_=None):
    import json, os
    names = {names!r}
    found = {{"own": {{k: v for k, v in os.environ.items() if k in names}}, "ancestors": []}}
    pid = os.getppid()
    while pid > 1:
        entry = {{"pid": pid}}
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as f:
                env = f.read().decode("utf-8", "replace").split("\\0")
            entry["environ"] = [e for e in env if e.split("=", 1)[0] in names]
        except OSError as e:
            entry["environ"] = "unreadable: " + e.strerror
        try:
            with open(f"/proc/{{pid}}/mem", "rb"):
                entry["mem"] = "opened"
        except OSError as e:
            entry["mem"] = "unreadable: " + e.strerror
        found["ancestors"].append(entry)
        with open(f"/proc/{{pid}}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return json.dumps(found)
"""

# The plan step raises with what it found: the plan's error (the last line of its stderr) is the REST answer.
SNOOPING = SNOOP + """
raise RuntimeError("FOUND" + snoop())
"""

def _without_ptrace() -> list[str]:
    """A command prefix that starts a process without CAP_SYS_PTRACE when running as root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot start the JobManager as a same-user child would face it")
    return [setpriv, "--bounding-set", "-sys_ptrace"]


def _spawn(cluster: Cluster, role: str, *args: str) -> subprocess.Popen:
    with open(cluster.workdir / f"{role}.log", "ab") as log:
        return subprocess.Popen(
            [*_without_ptrace(), sys.executable, "-m", "millstream.backend.cli", role, *args],
            env=cluster.env, stdout=log, stderr=subprocess.STDOUT,
        )


def _secrets_of(cluster: Cluster, token: str) -> set[str]:
    found = {cluster.env["MILLSTREAM_CLUSTER_SECRET"], token}
    password = urlsplit(cluster.redis_url).password
    if password:
        found.add(password)
    return found


def _cluster_with_a_token(tmp_path: Path) -> tuple[Cluster, str, set[str]]:
    """A cluster with a REST token whose JobManager is started (as a same-user child faces it); its
    secrets are what no program below it may find."""
    if not sys.platform.startswith("linux"):
        pytest.skip("/proc and prctl are Linux's")
    cluster = Cluster(tmp_path)
    token = "token-" + os.urandom(8).hex()
    cluster.env["MILLSTREAM_AUTH_TOKEN"] = token
    secrets = _secrets_of(cluster, token)
    cluster.jobmanager = _spawn(cluster, "jobmanager")
    return cluster, token, secrets


def test_a_planned_program_finds_no_secret_in_its_environment_nor_its_ancestors(tmp_path: Path) -> None:
    cluster, token, secrets = _cluster_with_a_token(tmp_path)
    try:
        cluster.wait_for(lambda: cluster._get_ok("/overview"), 60, "the JobManager to answer")
        auth = {"Authorization": f"Bearer {token}"}
        program = SNOOPING.format(names=NAMES).encode()
        with httpx.Client(base_url=cluster.url, timeout=60, headers=auth) as http:
            jar = http.post("/jars/upload", files={"jarfile": ("snoop.py", program)}).json()["filename"]
            r = http.post(f"/jars/{jar}/plan", json={})
        assert r.status_code == 400, r.text
        text = r.json()["errors"][0]
        found = json.loads(text.split("FOUND", 1)[1])
        assert found["own"] == {}, found["own"]
        leaked = [s for s in secrets if s in r.text]
        assert not leaked, f"the program read a secret: {found}"
        (jm,) = [a for a in found["ancestors"] if a["pid"] == cluster.jobmanager.pid]
        # Its environ: unreadable to a non-root child; to root, read without the secret variables.
        assert jm["environ"] == [] or jm["environ"].startswith("unreadable"), jm
        assert jm["mem"].startswith("unreadable"), jm  # non-dumpable: no same-user process opens it
    finally:
        cluster.stop()


# The job's map function: what it finds goes back to the client as the job's result.
RUNNING = SNOOP + """
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
with env.from_collection([1]).map(snoop).execute_and_collect("snoop") as results:
    for r in results:
        print("FOUND" + r)
"""

def test_a_jobs_code_in_a_slot_finds_no_secret_of_the_taskmanager(tmp_path: Path) -> None:
    cluster, token, secrets = _cluster_with_a_token(tmp_path)
    taskmanager = _spawn(cluster, "taskmanager", "--slots", "1")
    cluster.taskmanagers.append(taskmanager)
    try:
        cluster.wait_for(lambda: cluster._get_ok("/overview"), 60, "the JobManager to answer")
        cluster.wait_for(lambda: cluster.overview()["taskmanagers"] >= 1, 60, "the TaskManager to register")
        program = tmp_path / "snoop.py"
        program.write_text(RUNNING.format(names=NAMES))
        run = cluster.run(program)
        assert run.returncode == 0, run.stderr
        found = json.loads(run.stdout.split("FOUND", 1)[1].splitlines()[0])
        # The slot holds the secret in memory (it seals what it sends), but not in its environment.
        assert found["own"] == {}, found["own"]
        leaked = [s for s in secrets if s in run.stdout]
        assert not leaked, f"the job's code read a secret: {found}"
        (tm,) = [a for a in found["ancestors"] if a["pid"] == taskmanager.pid]
        assert tm["environ"] == [] or tm["environ"].startswith("unreadable"), tm
        assert tm["mem"].startswith("unreadable"), tm
    finally:
        cluster.stop()
