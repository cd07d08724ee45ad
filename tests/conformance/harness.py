"""The PyFlink conformance suite's shared parts: where programs and fixtures live, how output is
cleaned and compared, the known-failures list, and how a program is run in-process or on a cluster.

Used by test_conformance.py (pytest), report.py (counts for the README) and record_pyflink.py
(which writes the fixtures from real PyFlink). Nothing here imports the engine, so the recorder can
run without Millstream's dependencies.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PROGRAMS = HERE / "programs"
FIXTURES = HERE / "fixtures"
KNOWN_FAILURES = HERE / "known_failures.txt"

MODES = ("local", "cluster")
ORDERED_MARK = re.compile(r"^#\s*conformance:\s*ordered\b", re.MULTILINE)

# Lines PyFlink, Beam or the JVM write to stdout that are not the program's output.
NOISE = (
    re.compile(r"Using Any for unsupported type"),
    re.compile(r"No module named google"),
    re.compile(r"PYFLINK_CYTHON_ENABLED"),
    re.compile(r"^WARNING: "),  # JVM illegal-access and Beam warnings
    re.compile(r"^SLF4J: "),
    re.compile(r"^log4j:"),
)
# What `millstream run` itself adds after the program's own output: one line per submitted job.
JOB_STATE_LINE = re.compile(r"^Job [0-9a-f]{32} [A-Z]+$")
SUBMITTED_LINE = re.compile(r"submitted with JobID ([0-9a-f]{32})")


_EXCEPTION_LINE = re.compile(r"^(Caused by: |: )?([\w.]+\.)?\w*(Error|Exception|Exit)\b")


def error_summary(stderr: str) -> str:
    """The most telling line of a failed run's stderr: the last exception line (Python's, or a Java
    "Caused by:"), else the last non-blank line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    found = [ln for ln in lines if _EXCEPTION_LINE.match(ln)]
    return (found or lines or [""])[-1][:240]


def program_paths(names: Iterable[str] = ()) -> list[Path]:
    """Every conformance program (sorted), or those named (with or without .py)."""
    wanted = {n.removesuffix(".py") for n in names}
    paths = sorted(p for p in PROGRAMS.glob("*.py") if not p.name.startswith("_"))
    if wanted:
        unknown = wanted - {p.stem for p in paths}
        if unknown:
            raise SystemExit(f"no such conformance program: {', '.join(sorted(unknown))}")
        paths = [p for p in paths if p.stem in wanted]
    return paths


def clean_output(text: str) -> list[str]:
    """The program's output lines without noise lines or trailing whitespace."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    return [ln for ln in lines if not any(p.search(ln) for p in NOISE)]


def is_ordered(program: Path) -> bool:
    return bool(ORDERED_MARK.search(program.read_text()))


@dataclass(frozen=True)
class Fixture:
    """What real PyFlink did with a program: its output, or why it could not run it."""

    name: str
    lines: list[str] | None  # None: no fixture recorded
    pyflink_failure: str | None = None  # set when real PyFlink itself failed

    @property
    def recorded(self) -> bool:
        return self.lines is not None or self.pyflink_failure is not None


def load_fixture(name: str) -> Fixture:
    status = FIXTURES / f"{name}.status"
    out = FIXTURES / f"{name}.out"
    if status.exists():
        err = FIXTURES / f"{name}.err"
        summary = error_summary(err.read_text()) if err.exists() else ""
        return Fixture(name, None, status.read_text().strip() + (f": {summary}" if summary else ""))
    if out.exists():
        return Fixture(name, out.read_text().splitlines())
    return Fixture(name, None)


def compare(expected: list[str], actual: list[str], ordered: bool) -> str | None:
    """None if the outputs match, else a short human-readable description of the difference."""
    if ordered:
        if expected == actual:
            return None
        for i, (e, a) in enumerate(zip(expected, actual)):
            if e != a:
                return f"line {i + 1}: expected {e!r}, got {a!r}"
        return f"expected {len(expected)} lines, got {len(actual)}"
    exp, act = Counter(expected), Counter(actual)
    if exp == act:
        return None
    missing = sorted((exp - act).elements())
    extra = sorted((act - exp).elements())
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing, e.g. {missing[:3]!r}")
    if extra:
        parts.append(f"{len(extra)} unexpected, e.g. {extra[:3]!r}")
    return "; ".join(parts)


def load_known_failures(path: Path = KNOWN_FAILURES) -> dict[tuple[str, str], str]:
    """(program, mode) -> reason. A line is `name  reason` (both modes) or `name@local  reason` /
    `name@cluster  reason`; `#` starts a comment line."""
    known: dict[tuple[str, str], str] = {}
    if not path.exists():
        return known
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        head, _, reason = line.partition(" ")
        name, _, mode = head.partition("@")
        if mode and mode not in MODES:
            raise ValueError(f"{path.name}:{n}: mode must be one of {MODES}, not {mode!r}")
        if not reason.strip():
            raise ValueError(f"{path.name}:{n}: {name} needs a one-line reason")
        for m in (mode,) if mode else MODES:
            known[(name, m)] = reason.strip()
    return known


@dataclass(frozen=True)
class RunResult:
    returncode: int | None  # None: timed out
    stdout: str
    stderr: str

    def lines(self) -> list[str]:
        return clean_output(self.stdout)

    def failure(self) -> str | None:
        """Why the run itself failed (exit status, timeout), or None."""
        if self.returncode is None:
            return "timed out"
        if self.returncode != 0:
            summary = error_summary(self.stderr)
            return f"exit status {self.returncode}" + (f": {summary}" if summary else "")
        return None


def run_command(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> RunResult:
    try:
        p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        def text(b: bytes | str | None) -> str:
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return RunResult(None, text(e.stdout), text(e.stderr))
    return RunResult(p.returncode, p.stdout, p.stderr)


def _environ() -> dict[str, str]:
    """A copy of ``os.environ`` taken on a pool thread (``LazyRuns``): pytest sets and removes
    PYTEST_CURRENT_TEST on the main thread meanwhile, and a copy that meets the removal raises
    KeyError (seen in CI); it is taken again."""
    for _ in range(100):
        try:
            return dict(os.environ)
        except (KeyError, RuntimeError):
            continue
    return dict(os.environ)


def millstream_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = _environ() if base is None else dict(base)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_local(program: Path, timeout: float = 90, python: str = sys.executable) -> RunResult:
    """`python prog.py`: Millstream's in-process mini-cluster, as a user runs a program."""
    return run_command([python, str(program)], millstream_env(), program.parent, timeout)


def run_on_cluster(program: Path, env: dict[str, str], timeout: float = 150, python: str = sys.executable,
                   args: Sequence[str] = ()) -> RunResult:
    """`millstream run [args] prog.py` against the cluster ``env`` points at; the per-job state lines
    the client adds are dropped so the output compares with the program's own."""
    cmd = [python, "-m", "millstream.backend.cli", "run", *args, str(program)]
    r = run_command(cmd, millstream_env(env), REPO, timeout)
    stderr = r.stderr
    if r.returncode is None:
        submitted = SUBMITTED_LINE.search(r.stderr)
        if submitted:
            stderr += "\n" + describe_job(env["MILLSTREAM_JOBMANAGER"], submitted.group(1))
        cancel_stuck_jobs(env["MILLSTREAM_JOBMANAGER"], older_than_ms=int(timeout * 1000 * 0.8))
    kept = [ln for ln in r.stdout.splitlines() if not JOB_STATE_LINE.match(ln.strip())]
    return RunResult(r.returncode, "\n".join(kept) + ("\n" if kept else ""), stderr)


def describe_job(jobmanager_url: str, jid: str) -> str:
    """What the cluster says about a job whose client timed out: its state, each vertex's state and
    record counts, and the cluster's free slots, so a hang in CI says where it stopped."""
    import httpx  # only the cluster mode needs it

    try:
        with httpx.Client(base_url=jobmanager_url, timeout=10) as http:
            job = http.get(f"/jobs/{jid}").json()
            lines = [f"job {jid}: {job.get('state')}"]
            for v in job.get("vertices", []):
                m = v.get("metrics", {})
                lines.append(f"  {v.get('name')}: {v.get('status')} tasks={v.get('tasks')} "
                             f"in={m.get('read-records')} out={m.get('write-records')}")
            overview = http.get("/overview").json()
            lines.append(f"slots: {overview.get('slots-available')} free of {overview.get('slots-total')}; "
                         f"jobs running: {overview.get('jobs-running')}")
            return "\n".join(lines)
    except Exception as e:  # a diagnostic must not hide the timeout it explains
        return f"(could not describe job {jid}: {e!r})"


def cancel_stuck_jobs(jobmanager_url: str, older_than_ms: int) -> None:
    """Cancel the cluster's unfinished jobs running longer than any conformance program should, so a
    program that hangs does not hold slots the next submissions need. (The client that timed out
    never printed its job id, and other submissions run concurrently: age is what tells them apart.)"""
    import httpx  # only the cluster mode needs it

    with httpx.Client(base_url=jobmanager_url, timeout=30) as http:
        for job in http.get("/jobs/overview").json()["jobs"]:
            if job["state"] not in ("FINISHED", "FAILED", "CANCELED") and job.get("duration", 0) > older_than_ms:
                http.patch(f"/jobs/{job['jid']}", params={"mode": "cancel"})


def verdict(fixture: Fixture, program: Path, result: RunResult) -> str | None:
    """None when Millstream's run matches real PyFlink's, else why not."""
    failed = result.failure()
    if failed:
        return failed
    assert fixture.lines is not None
    return compare(fixture.lines, result.lines(), is_ordered(program))


class LazyRuns:
    """Runs programs in a bounded thread pool, each at most once, started on first demand.

    ``start(names)`` queues a whole batch so the pool works ahead while pytest reports one test at
    a time; ``get(name)`` waits for one result (starting it if nobody queued it).
    """

    def __init__(self, run: Callable[[Path], RunResult], workers: int) -> None:
        self._run = run
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._futures: dict[str, Future[RunResult]] = {}

    def start(self, programs: Iterable[Path]) -> None:
        for p in programs:
            if p.stem not in self._futures:
                self._futures[p.stem] = self._pool.submit(self._run, p)

    def get(self, program: Path) -> RunResult:
        self.start([program])
        return self._futures[program.stem].result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
