"""Runs an uploaded program in a subprocess to obtain its JobGraph.

The program is user code: it runs in its own process with a timeout, so a
crash, a hang or a sys.exit cannot affect the JobManager. A failure is
reported with the last line of the traceback, as Flink reports a jar's.
It runs with a clean environment (none of the JobManager's secrets, database
or Redis URLs), inside the plan sandbox (plan_sandbox.py) that kills every
process it forked when it ends or times out, and only ``max_concurrent`` plans
run at once: more get :class:`PlanBusy` (429) instead of tying up the server.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from millstream.engine.client.python_options import PythonDependencyOptions
from millstream.engine.graph.job_graph import JobGraph


# What a plan subprocess may see of the JobManager's environment: enough to find Python and
# the engine, never a credential (MILLSTREAM_*, DATABASE_URL, REDIS_URL, cloud keys...).
_ENV_PASSED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT")
_SANDBOX_GRACE_S = 15.0  # the sandbox kills on time itself; this only covers a sandbox that hangs


class PlanBusy(RuntimeError):
    """Too many plans are running; the caller should retry later (HTTP 429)."""


class ProgramFailed(ValueError):
    def __init__(self, summary: str, output: str) -> None:
        super().__init__(summary)
        self.output = output


@dataclass(frozen=True)
class CapturedJob:
    job_graph: JobGraph
    user_code: bytes


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def plan_environment(home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _ENV_PASSED}
    env.update(HOME=home, TMPDIR=home, PYTHONUNBUFFERED="1")
    return env


class PlanLimiter:
    """At most ``max_concurrent`` plans at once; the rest are refused at once, not queued,
    so waiting callers never hold the server's request threads."""

    def __init__(self, max_concurrent: int) -> None:
        self.max_concurrent = max_concurrent
        self._slots = threading.BoundedSemaphore(max_concurrent)

    def __enter__(self) -> None:
        if not self._slots.acquire(blocking=False):
            raise PlanBusy(f"{self.max_concurrent} programs are already being planned; retry later")

    def __exit__(self, *exc: object) -> None:
        self._slots.release()


def _run_sandboxed(cmd: list[str], cwd: str, env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess:
    sandbox = [sys.executable, "-m", "millstream.backend.services.plan_sandbox", "--timeout", str(timeout_s), "--", *cmd]
    proc = subprocess.Popen(
        sandbox, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s + _SANDBOX_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return subprocess.CompletedProcess(sandbox, 124, out, err)
    return subprocess.CompletedProcess(sandbox, proc.returncode, out, err)


def capture_job(
    program: Path,
    args: list[str],
    parallelism: int | None,
    timeout_s: float,
    default_parallelism: int | None = None,
    dependencies: PythonDependencyOptions | None = None,
) -> CapturedJob:
    """Run ``program`` for its job: ``parallelism`` is the request's (as -p), ``default_parallelism`` the
    cluster's, for a program that sets none (MILLSTREAM_PARALLELISM_DEFAULT); ``dependencies``, already
    resolved and checked, are shipped with the job as ``millstream run -pyfs/-pyarch/-pyreq`` ships them."""
    with tempfile.TemporaryDirectory(prefix="millstream-plan-") as out:
        cmd = [sys.executable, "-m", "millstream.engine.client.plan_capture", "--out", out]
        if parallelism:
            cmd += ["--parallelism", str(parallelism)]
        if default_parallelism:
            cmd += ["--default-parallelism", str(default_parallelism)]
        if dependencies:
            cmd += ["--python-dependencies", json.dumps(dependencies.to_dict())]
        cmd += [str(program), *args]
        started = time.monotonic()
        proc = _run_sandboxed(cmd, str(program.parent), plan_environment(out), timeout_s)
        if proc.returncode == 124 and time.monotonic() - started >= timeout_s:
            raise ProgramFailed(f"the program did not submit a job within {timeout_s:g} s", "")
        if proc.returncode != 0:
            raise ProgramFailed(_last_line(proc.stderr or proc.stdout), proc.stderr[-20000:])
        graph = JobGraph.from_dict(json.loads((Path(out) / "jobgraph.json").read_text()))
        code = (Path(out) / "usercode.bin").read_bytes()
        return CapturedJob(graph, code)
