"""JobManager memory per finished job (issue 13): many short jobs on one cluster, with the JobManager
open to inspection, to tell what grows with the number of jobs it ran and where it lives.

A local cluster (embedded valkey, 1 TaskManager x 2 slots, a JobManager started through
``traced_jobmanager.py``, jobs leaving memory 200 ms after they end) runs ``--warm`` short word
counts, then ``--jobs`` more in ``--steps`` equal steps. After the warm-up and after each step, once
every job left JobManager memory, it samples the JobManager: its resident set (RSS), SQLite's own
heap, pymalloc's arenas and the bytes live objects use in them, the resident parts of glibc's main
heap and of anonymous mappings, its threads; with ``--trace N`` also tracemalloc's traced total and a
snapshot, and at the end the allocation sites that grew most from the first snapshot to the last, by
traceback. ``malloc_trim(0)`` at the end (or at every sample with ``--trim``) shows what RSS glibc
holds as free pages; ``--arena-max`` caps glibc's malloc arenas.

Usage: ``python benchmarks/jobmanager_memory_bench.py [--warm 10] [--jobs 100] [--steps 4] [--trace 10]
[--trim] [--arena-max 2]``. tracemalloc makes the JobManager slower and its RSS much larger (each
snapshot dump costs memory); read RSS from runs without it, and compare figures within one run.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402
from run import free_port  # noqa: E402

HERE = Path(__file__).resolve().parent
SHORT_JOB = HERE / "rolling_count_job.py"
MIB = 2**20


class TracedCluster:
    """Embedded valkey, a traced JobManager and one TaskManager, all in ``tmp``."""

    def __init__(self, tmp: Path, frames: int, arena_max: int = 0, jm_env: dict[str, str] | None = None, slots: int = 2) -> None:
        from millstream.backend.embedded_redis import redis_url_of, start_embedded_redis

        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.trace_dir = tmp / "trace"
        self.trace_dir.mkdir()
        self.redis = start_embedded_redis(tmp / "valkey", password=secrets.token_urlsafe(32))
        self.log = tmp / "log" / "jobmanager.log"
        self.env = dict(
            os.environ,
            REDIS_URL=redis_url_of(self.redis),
            MILLSTREAM_DATA_DIR=str(tmp),
            MILLSTREAM_CHECKPOINT_DIR=str(tmp / "checkpoints"),
            MILLSTREAM_HOST="127.0.0.1",
            MILLSTREAM_PORT=str(self.port),
            MILLSTREAM_CLUSTER_SECRET=secrets.token_hex(32),
            MILLSTREAM_JOB_ARCHIVE_AFTER_MS="200",
            MILLSTREAM_JOBMANAGER=self.url,
            JOBMANAGER_TRACE_DIR=str(self.trace_dir),
            JOBMANAGER_TRACE_FRAMES=str(frames),
            PYTHONUNBUFFERED="1",
        )
        self.env.pop("DATABASE_URL", None)
        cli = [sys.executable, "-m", "millstream.backend.cli"]
        (tmp / "log").mkdir()
        # glibc's malloc arenas (by default up to 8 per core, one per thread that allocates at once)
        jm_env = {**self.env, **(jm_env or {}), **({"MALLOC_ARENA_MAX": str(arena_max)} if arena_max else {})}
        self.jobmanager = subprocess.Popen(
            [sys.executable, str(HERE / "traced_jobmanager.py"), "jobmanager", "--log-file", str(self.log)],
            env=jm_env, stdout=open(tmp / "log" / "jobmanager.out", "wb"), stderr=subprocess.STDOUT,
        )
        self.taskmanager = subprocess.Popen(
            [*cli, "taskmanager", "--slots", str(slots), "--log-file", str(tmp / "log" / "taskmanager.log")],
            env=self.env, stdout=open(tmp / "log" / "taskmanager.out", "wb"), stderr=subprocess.STDOUT,
        )
        self._snaps = 0
        self._trims = 0

    def wait_ready(self, timeout: float = 600) -> None:  # slow to start under tracemalloc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.jobmanager.poll() is not None:
                out = (self.tmp / "log" / "jobmanager.out").read_text()[-2000:]
                raise RuntimeError(f"the JobManager exited: {out}")
            try:
                if httpx.get(f"{self.url}/overview", timeout=2).json().get("taskmanagers", 0) >= 1:
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.3)
        raise RuntimeError("the cluster did not come up")

    def run_short(self, i: int) -> None:
        p = subprocess.run(
            [sys.executable, "-m", "millstream.backend.cli", "run", str(SHORT_JOB), "2000", "2", f"short-{i}"],
            env=self.env, capture_output=True, text=True, timeout=300,
        )
        if p.returncode != 0 or "records_per_s=" not in p.stdout:
            raise RuntimeError(f"short job {i} failed: {(p.stderr or p.stdout)[-2000:]}")

    def wait_archived(self, jobs: int, timeout: float = 120) -> None:
        """Until ``jobs`` jobs have left JobManager memory (its log says so for each)."""
        deadline = time.monotonic() + timeout
        while len(re.findall(r"left memory for the JobStore", self.log.read_text())) < jobs:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {jobs} jobs left JobManager memory")
            time.sleep(0.1)

    def _signal(self, sig: int, name: str) -> dict:
        out = self.trace_dir / name
        self.jobmanager.send_signal(sig)
        deadline = time.monotonic() + 300
        while not out.exists():
            if time.monotonic() > deadline or self.jobmanager.poll() is not None:
                raise RuntimeError(f"the JobManager wrote no {name}")
            time.sleep(0.1)
        time.sleep(0.05)  # the file is written in one call; let it close
        return json.loads(out.read_text())

    def snapshot(self) -> tuple[dict, Path]:
        n = self._snaps
        self._snaps += 1
        figures = self._signal(signal.SIGUSR1, f"snap-{n}.json")
        return figures, self.trace_dir / f"snap-{n}.trace"

    def trim(self) -> dict:
        n = self._trims
        self._trims += 1
        return self._signal(signal.SIGUSR2, f"trim-{n}.json")

    def stop(self) -> None:
        for p in (self.taskmanager, self.jobmanager):
            p.send_signal(signal.SIGTERM)
        for p in (self.taskmanager, self.jobmanager):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.redis.stop()


def _ignore(snap: tracemalloc.Snapshot) -> tracemalloc.Snapshot:
    return snap.filter_traces((
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
        tracemalloc.Filter(False, "<unknown>"),
    ))


def grown(first: Path, last: Path, jobs: int, top: int) -> list[str]:
    """The allocation sites that grew most between two snapshots, by traceback, per job run between."""
    a = _ignore(tracemalloc.Snapshot.load(str(first)))
    b = _ignore(tracemalloc.Snapshot.load(str(last)))
    lines = []
    for stat in b.compare_to(a, "traceback")[:top]:
        if stat.size_diff <= 0:
            break
        lines.append(
            f"{stat.size_diff / 1024:+.1f} KiB ({stat.size_diff / jobs:+.0f} B/job), "
            f"{stat.count_diff:+d} blocks, now {stat.size / 1024:.1f} KiB:"
        )
        lines.extend(f"    {ln}" for ln in stat.traceback.format(limit=8, most_recent_first=True))
    return lines


def _mib(figures: dict, key: str) -> str:
    return f"{figures[key] / MIB:.2f}" if key in figures else "-"


def _curve(name: str, points: list[tuple[int, dict]], key: str) -> str:
    values = [p[1].get(key) for p in points]
    if any(v is None or v < 0 for v in values):
        return f"{name}: not measured"
    ran = points[-1][0] - points[0][0]
    return (
        f"{name}: " + " / ".join(f"{v / MIB:.1f}" for v in values)
        + f" ({(values[-1] - values[0]) / 1024 / ran:+.1f} KiB per job after the warm-up)"
    )


def bench(
    warm: int, jobs: int, steps: int, top: int, frames: int, trim: bool, arena_max: int = 0, jm_env: dict[str, str] | None = None
) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="millstream-jm-memory-") as tmp:
        c = TracedCluster(Path(tmp), frames, arena_max, jm_env)
        try:
            c.wait_ready()
            done = 0
            points: list[tuple[int, dict]] = []
            traces: list[Path] = []

            def sample() -> None:
                c.wait_archived(done)
                figures, trace = c.snapshot()
                if trim:  # RSS after glibc gave back its free pages: what live allocations hold
                    figures["trimmed"] = c.trim()["after"]
                points.append((done, figures))
                traces.append(trace)
                print(f"after {done} jobs: " + ", ".join(
                    f"{k} {figures[k]}" if k == "threads" else f"{k} {_mib(figures, k)} MiB" for k in figures
                ), flush=True)

            for _ in range(warm):
                c.run_short(done)
                done += 1
            sample()
            for _ in range(steps):
                for _ in range(jobs // steps):
                    c.run_short(done)
                    done += 1
                sample()
            overview = httpx.get(f"{c.url}/overview", timeout=10).json()
            lines = [
                f"JobManager memory over {done} short jobs ({overview['jobs-finished']} FINISHED), sampled once "
                f"every job had left memory; tracemalloc {'on, %d frames' % frames if frames else 'off'}"
                + (f", MALLOC_ARENA_MAX={arena_max}" if arena_max else "")
                + "".join(f", {k}={v}" for k, v in (jm_env or {}).items()) + ":",
                "jobs: " + " / ".join(str(p[0]) for p in points),
                _curve("RSS MiB", points, "rss"),
                _curve("SQLite heap MiB", points, "sqlite"),
                _curve("pymalloc arenas MiB", points, "pymalloc"),
                _curve("bytes live objects use in them MiB", points, "pymalloc_used"),
                _curve("glibc main heap ([heap]) RSS MiB", points, "heap"),
                _curve("anonymous mappings RSS MiB", points, "anon"),
                "threads: " + " / ".join(str(p[1].get("threads", "-")) for p in points),
            ]
            if trim:
                lines.append(_curve("RSS after malloc_trim(0) MiB", points, "trimmed"))
            else:
                end = c.trim()
                lines.append(f"malloc_trim(0) at the end: RSS {end['before'] / MIB:.1f} -> {end['after'] / MIB:.1f} MiB")
            if frames:
                ran = points[-1][0] - points[0][0]
                lines += [
                    _curve("traced (Python objects) MiB", points, "traced"),
                    f"allocation sites grown from {points[0][0]} to {points[-1][0]} jobs (top {top}, by traceback):",
                    *grown(traces[0], traces[-1], ran, top),
                ]
            return lines
        finally:
            c.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--trace", type=int, default=0, metavar="FRAMES",
                    help="run the JobManager under tracemalloc with tracebacks this deep (0: off)")
    ap.add_argument("--trim", action="store_true", help="malloc_trim(0) at every sample, and report RSS after it")
    ap.add_argument("--arena-max", type=int, default=0, help="MALLOC_ARENA_MAX for the JobManager (0: glibc's default)")
    ap.add_argument("--jm-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for the JobManager only (e.g. a glibc malloc tunable); repeatable")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    for line in bench(args.warm, args.jobs, args.steps, args.top, args.trace, args.trim, args.arena_max,
                      dict(e.split("=", 1) for e in args.jm_env)):
        print(line, flush=True)


if __name__ == "__main__":
    main()
