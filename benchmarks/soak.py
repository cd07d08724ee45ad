"""Soak benchmark (issue 13): a long checkpointed job plus a stream of short jobs on one cluster, with
the memory of every process and Redis sampled at the start and the end. Nothing may only grow.

A local cluster (JobManager, 2 TaskManagers x 2 slots, embedded Redis) runs ``soak_job.py`` for
``--minutes`` (default 30) at a steady rate with exactly-once checkpoints every second, writing to an
exactly-once FileSink, while ``--short-jobs`` (default 200) small word counts are run one after
another through ``millstream run``. Samples: resident memory of the JobManager, of each TaskManager's
process tree (its slot processes included), of the Redis server, Redis's own ``used_memory`` and its
client and key counts. The first sample is taken once the long job and the first short jobs ran (so
imports and caches are warm); the report gives start, end and end/start for each.

Usage: ``python benchmarks/soak.py [--minutes 30] [--short-jobs 200]`` (``make bench`` runs it with
``--soak-minutes``); exits non-zero when a job fails.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402

HERE = Path(__file__).resolve().parent
LONG_JOB = HERE / "soak_job.py"
SHORT_JOB = HERE / "rolling_count_job.py"


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (a TaskManager's slot processes)."""
    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


@dataclass
class Sample:
    at_s: float
    figures: dict[str, float] = field(default_factory=dict)


def sample(cluster, r: redis.Redis, started: float) -> Sample:
    s = Sample(time.monotonic() - started)
    for child in cluster.children:
        if child.proc is not None:
            s.figures[f"{child.name} RSS MiB"] = tree_rss(child.proc.pid) / 2**20
    info = r.info()
    s.figures["redis RSS MiB"] = info["used_memory_rss"] / 2**20
    s.figures["redis used_memory MiB"] = info["used_memory"] / 2**20
    s.figures["redis clients"] = info["connected_clients"]
    s.figures["redis keys"] = r.dbsize()
    return s


def trend(points: list[tuple[int, Sample]]) -> list[str]:
    """Each process's RSS after 0, 1/4, 1/2, 3/4 and all of the short jobs, and the growth per quarter."""
    lines = []
    for name in points[0][1].figures:
        if not name.endswith("RSS MiB"):
            continue
        values = [s.figures.get(name, 0.0) for _, s in points]
        steps = ", ".join(f"{b - a:+.1f}" for a, b in zip(values, values[1:]))
        lines.append(
            f"{name} after {'/'.join(str(n) for n, _ in points)} jobs: "
            + " ".join(f"{v:.1f}" for v in values) + f" (steps {steps})"
        )
    return lines


def report(first: Sample, last: Sample) -> list[str]:
    lines = [f"{'what':32} {'start':>10} {'end':>10} {'end/start':>10}"]
    for name, a in first.figures.items():
        b = last.figures.get(name, 0.0)
        ratio = f"{b / a:.2f}" if a else "-"
        lines.append(f"{name:32} {a:10.1f} {b:10.1f} {ratio:>10}")
    lines.append(f"(samples at {first.at_s:.0f} s and {last.at_s:.0f} s after the start)")
    return lines


def run_short(env: dict[str, str], i: int) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "millstream.backend.cli", "run", str(SHORT_JOB), "20000", "2", f"short-{i}"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    if p.returncode != 0 or "records_per_s=" not in p.stdout:
        raise RuntimeError(f"short job {i} failed: {(p.stderr or p.stdout)[-2000:]}")


def soak(minutes: float, short_jobs: int) -> list[str]:
    from millstream.backend.cluster_launcher import LocalCluster
    from millstream.backend.settings import Settings
    from run import free_port

    with tempfile.TemporaryDirectory(prefix="millstream-soak-") as tmp:
        settings = Settings(port=free_port(), data_dir=Path(tmp), redis_url=None, database_url=None)
        cluster = LocalCluster(settings, taskmanagers=2, slots=2, restart_taskmanagers=False)
        try:
            redis_url = cluster.start()
            if not cluster.wait_ready():
                raise RuntimeError(f"the cluster did not start; see {tmp}/log")
            url = f"http://127.0.0.1:{settings.port}"
            env = dict(cluster.env, MILLSTREAM_JOBMANAGER=url)
            r = redis.Redis.from_url(redis_url)
            rate = 200
            # Runs until cancelled below, after the short jobs and at least ``minutes``: its end is ours.
            n = int(minutes * 60 * rate * 10)
            long_run = subprocess.Popen(
                [sys.executable, "-m", "millstream.backend.cli", "run", str(LONG_JOB), str(n), str(rate), str(Path(tmp) / "out")],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            started = time.monotonic()
            deadline = started + minutes * 60
            # Spread the short jobs over the run; a few first, to warm up before the first sample.
            warm = min(5, short_jobs)
            for i in range(warm):
                run_short(env, i)
            first = sample(cluster, r, started)
            print(f"after {warm} jobs: " + ", ".join(f"{k} {v:.1f}" for k, v in first.figures.items()), flush=True)
            # Samples along the way too: growth that levels off shows as smaller steps in later quarters.
            quarters = {warm + (short_jobs - warm) * q // 4 for q in (1, 2, 3)}
            along: list[tuple[int, Sample]] = []
            gap = max(0.0, (deadline - time.monotonic()) / max(1, short_jobs - warm) - 1.0)
            for i in range(warm, short_jobs):
                run_short(env, i)
                if i + 1 in quarters:
                    along.append((i + 1, sample(cluster, r, started)))
                    # Printed as it comes, so a run cut short still tells how memory went.
                    print(f"after {i + 1} jobs: " + ", ".join(f"{k} {v:.1f}" for k, v in along[-1][1].figures.items()), flush=True)
                if long_run.poll() is not None:
                    raise RuntimeError(f"the long job ended early: {long_run.stderr.read()[-2000:] if long_run.stderr else ''}")
                time.sleep(min(gap, max(0.0, deadline - time.monotonic())))
            time.sleep(max(0.0, deadline - time.monotonic()))
            if long_run.poll() is not None:
                raise RuntimeError(f"the long job ended early: {long_run.stderr.read()[-2000:] if long_run.stderr else ''}")
            time.sleep(5)  # let finished short jobs leave memory for the archive
            last = sample(cluster, r, started)
            jobs = httpx.get(f"{url}/jobs/overview", timeout=10).json()["jobs"]
            finished = sum(1 for j in jobs if j["state"] == "FINISHED")
            running = [j["jid"] for j in jobs if j["state"] == "RUNNING"]
            checkpoints = httpx.get(f"{url}/jobs/{running[0]}/checkpoints", timeout=10).json()["counts"] if running else {}
            for jid in running:
                httpx.patch(f"{url}/jobs/{jid}", params={"mode": "cancel"}, timeout=10)
            long_run.wait(120)
            lines = [
                f"soak: {last.at_s / 60:.0f} min of a checkpointed job at {rate} records/s "
                f"({checkpoints.get('completed', 0)} checkpoints completed, {checkpoints.get('failed', 0)} failed) "
                f"plus {short_jobs} short jobs, {finished} of them FINISHED",
                *report(first, last),
                *trend([(warm, first), *along, (short_jobs, last)]),
            ]
            return lines
        finally:
            cluster.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--short-jobs", type=int, default=200)
    args = ap.parse_args()
    print(f"machine: {machine()}")
    for line in soak(args.minutes, args.short_jobs):
        print(line, flush=True)


if __name__ == "__main__":
    main()
