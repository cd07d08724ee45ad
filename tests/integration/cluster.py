"""A real Millstream cluster for tests: its own valkey-server, a JobManager and TaskManager processes."""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from millstream.backend.embedded_redis import redis_url_of, start_embedded_redis
from millstream.backend.free_ports import consecutive_free_ports, free_port  # noqa: F401  (tests import them from here)

TERMINAL = ("FINISHED", "FAILED", "CANCELED")


class Cluster:
    def __init__(self, workdir: Path, heartbeat_timeout_ms: int = 3000, database_url: str | None = None) -> None:
        self.workdir = workdir
        self.redis = start_embedded_redis(workdir / "valkey")
        self.redis_url = redis_url_of(self.redis)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(os.environ)
        self.env.update(
            REDIS_URL=self.redis_url,
            MILLSTREAM_PORT=str(self.port),
            MILLSTREAM_DATA_DIR=str(workdir / "var"),
            MILLSTREAM_HEARTBEAT_TIMEOUT_MS=str(heartbeat_timeout_ms),
            MILLSTREAM_HEARTBEAT_INTERVAL_MS="500",
            MILLSTREAM_JOBMANAGER=self.url,
            PYTHONUNBUFFERED="1",
            MILLSTREAM_CLUSTER_SECRET=secrets.token_hex(32),  # signs user code; every process shares it
            # Tests put savepoints and checkpoint dirs under their own tmp_path: a sibling of workdir.
            MILLSTREAM_STATE_DIRS=str(workdir.parent),
        )
        if database_url:
            self.env["DATABASE_URL"] = database_url
        else:
            self.env.pop("DATABASE_URL", None)
        self.jobmanager: subprocess.Popen | None = None
        self.taskmanagers: list[subprocess.Popen] = []
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def _spawn(self, args: list[str], log_name: str) -> subprocess.Popen:
        log = open(self.workdir / log_name, "ab")
        return subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", *args], env=self.env, stdout=log, stderr=subprocess.STDOUT
        )

    def start_jobmanager(self) -> None:
        self.jobmanager = self._spawn(["jobmanager"], "jobmanager.log")
        self.wait_for(lambda: self._get_ok("/overview"), 60, "the JobManager to answer")

    def start_taskmanager(self, slots: int = 2) -> subprocess.Popen:
        p = self._spawn(["taskmanager", "--slots", str(slots)], f"taskmanager-{len(self.taskmanagers)}.log")
        self.taskmanagers.append(p)
        return p

    def replace_taskmanager(self, victim: subprocess.Popen, slots: int = 2) -> subprocess.Popen:
        """SIGKILL ``victim`` (a TaskManager of this cluster), wait until it is gone, and start a fresh
        one in its place, as a supervisor would; the job restores onto it."""
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        return self.start_taskmanager(slots)

    def start(self, taskmanagers: int = 2, slots: int = 2) -> "Cluster":
        self.start_jobmanager()
        for _ in range(taskmanagers):
            self.start_taskmanager(slots)
        self.wait_for(lambda: self.overview()["taskmanagers"] >= taskmanagers, 60, "TaskManagers to register")
        return self

    def _get_ok(self, path: str) -> bool:
        try:
            return self.http.get(path).status_code == 200
        except httpx.HTTPError:
            return False

    def overview(self) -> dict[str, Any]:
        return self.http.get("/overview").json()

    def job(self, jid: str) -> dict[str, Any]:
        r = self.http.get(f"/jobs/{jid}")
        r.raise_for_status()
        return r.json()

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if predicate():
                    return
            except (httpx.HTTPError, KeyError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    def wait_state(self, jid: str, states: tuple[str, ...], timeout: float = 60) -> dict[str, Any]:
        self.wait_for(lambda: self.job(jid)["state"] in states, timeout, f"job {jid} to reach {states}")
        return self.job(jid)

    def run(self, program: Path, *args: str, options: tuple[str, ...] = (), timeout: float = 180) -> subprocess.CompletedProcess:
        """``millstream run`` as a user would type it."""
        try:
            return subprocess.run(
                [sys.executable, "-m", "millstream.backend.cli", "run", *options, str(program), *args],
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"millstream run {program.name} timed out after {timeout}s\n{self.describe_hang(e)}") from e

    def describe_hang(self, e: subprocess.TimeoutExpired) -> str:
        """What the cluster says when a client timed out: the unfinished jobs' vertices and the
        processes' last log lines, so a hang in CI says where it stopped."""
        from tests.conformance.harness import describe_job

        def text(b: bytes | str | None) -> str:
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")

        parts = [f"client stderr (tail):\n{text(e.stderr)[-1500:]}"]
        try:
            for j in self.http.get("/jobs/overview").json()["jobs"]:
                if j["state"] not in TERMINAL:
                    parts.append(describe_job(self.url, j["jid"]))
        except httpx.HTTPError as err:
            parts.append(f"(the JobManager did not answer: {err!r})")
        for log in sorted(self.workdir.glob("*.log")):
            tail = log.read_text(errors="replace").splitlines()[-15:]
            parts.append(f"{log.name} (tail):\n" + "\n".join(tail))
        return "\n".join(parts)

    def cli(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        """Any ``millstream`` command as a user would type it (``savepoint``, ``stop``, ``list`` ...)."""
        return subprocess.run(
            [sys.executable, "-m", "millstream.backend.cli", *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def start_run(
        self, program: Path, *args: str, options: tuple[str, ...] = (), stderr_to: Path | None = None
    ) -> subprocess.Popen:
        """``millstream run`` in the background, for jobs the test stops or kills midway. With
        ``stderr_to`` its stderr goes to that file, which a test can read while the run goes on (a
        pipe can be read only once it ends); ``communicate()`` then returns None for it."""
        stderr: Any = subprocess.PIPE
        if stderr_to is not None:
            stderr = open(stderr_to, "w")  # the child holds its own copy; ours is closed below
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "millstream.backend.cli", "run", *options, str(program), *args],
                env=self.env, stdout=subprocess.PIPE, stderr=stderr, text=True,
            )
        finally:
            if stderr_to is not None:
                stderr.close()

    def finish(self, run: subprocess.Popen, timeout: float = 180) -> tuple[str, str]:
        """A background ``millstream run``'s (stdout, stderr) once it ends; if it does not within
        ``timeout``, it is killed and the test fails saying where the cluster stopped (describe_hang)."""
        try:
            return run.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as e:
            run.kill()
            e.stdout, e.stderr = run.communicate()
            raise AssertionError(f"millstream run timed out after {timeout}s\n{self.describe_hang(e)}") from e

    def records_out(self, jid: str) -> int:
        return sum(v["metrics"]["write-records"] for v in self.job(jid)["vertices"])

    def wait_processing(self, jid: str, timeout: float = 60) -> None:
        """Until the running job's record count moves on: its tasks work, so what a test does next
        is measured from a settled start (instead of a fixed pause)."""
        start = self.records_out(jid)
        self.wait_for(lambda: self.records_out(jid) > start, timeout, f"job {jid} to process records")

    def job_ids(self) -> set[str]:
        return {j["jid"] for j in self.http.get("/jobs/overview").json()["jobs"]}

    def wait_new_job(self, known: set[str], timeout: float = 60) -> str:
        """The id of a job submitted after ``known`` was read."""
        self.wait_for(lambda: self.job_ids() - known, timeout, "a new job")
        (jid,) = self.job_ids() - known
        return jid

    def wait_running(self, jid: str, timeout: float = 60) -> dict[str, Any]:
        """Until the job runs and every one of its tasks has started (running, or already finished,
        as a source subtask left without a split after a rescale does)."""
        def running() -> bool:
            job = self.job(jid)
            counts = job["status-counts"]
            started = counts.get("RUNNING", 0) + counts.get("FINISHED", 0)
            return job["state"] == "RUNNING" and counts.get("RUNNING", 0) > 0 and started == sum(counts.values())

        self.wait_for(running, timeout, f"job {jid} and all its tasks to run")
        return self.job(jid)

    def launch(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        """``millstream cluster start ARGS`` with this cluster's environment (or ``env``): the launcher
        starts the processes, not this object. Stop it with ``stop_launcher``."""
        return subprocess.Popen(
            [sys.executable, "-m", "millstream.backend.cli", "cluster", "start", *args],
            env=self.env if env is None else env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )

    @staticmethod
    def stop_launcher(launcher: subprocess.Popen) -> str:
        """Ctrl-C the launcher as a user would (it stops what it started); what it printed."""
        launcher.send_signal(signal.SIGINT)
        try:
            launcher.wait(30)
        except subprocess.TimeoutExpired:
            launcher.kill()
        return launcher.stdout.read() if launcher.stdout else ""

    def stop(self) -> None:
        self.http.close()
        for p in [*self.taskmanagers, self.jobmanager]:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in [*self.taskmanagers, self.jobmanager]:
            if p is not None:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        self.redis.stop()
