"""The data plane on one Redis server and sharded over three (issue 18), in the same run.

Two local clusters (2 TaskManagers x 2 slots each) run side by side, idle but for the job being
measured: one with its channels on the control Redis, as always, and one started with
``--data-redis 3`` (three embedded data servers, MILLSTREAM_DATA_REDIS_URLS). The reference workload
(the rolling word count at P=2) runs on each in turn, a warm-up first and then ABBA pairs.

For every run it reads the CPU time of each Redis process from ``/proc/<pid>/stat`` (utime + stime)
before and after, and reports:
- throughput, three servers / one (median of the per-pair ratios);
- Redis CPU seconds per million records, for the one server, and for the three data servers (summed,
  and the busiest one) plus the control Redis;
- what one Redis server carries: a server is one thread, so it saturates at one core, which at the
  measured CPU per record is ``1e6 / (CPU s per million records)`` records/s; divided by the records/s
  one TaskManager (2 slots) pushed in the same run, the number of such TaskManagers one server feeds
  before it saturates. With k data servers and channels spread evenly by the hash, k times that.

Run alone: ``python benchmarks/data_servers_bench.py [N [pairs]]``; ``make bench`` runs it too.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleave import abba_pairs  # noqa: E402
from machine import machine  # noqa: E402
from run import JOB, free_port, rate, run  # noqa: E402

SETTLE_S = 4.0  # before each run: the previous job's cluster finishes its after-job work
TASKMANAGERS = 2
_TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat (fields 14 and 15, after the command name)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


@dataclass
class Run:
    line: str  # the job's result line
    control_cpu: float  # CPU seconds of the control Redis during the run
    data_cpu: list[float]  # CPU seconds of each data server (empty: channels on the control Redis)

    @property
    def redis_cpu(self) -> float:
        return self.control_cpu + sum(self.data_cpu)


@contextmanager
def _cluster(data_servers: int) -> Iterator[Callable[[int], Run]]:
    from millstream.backend.cluster_launcher import LocalCluster
    from millstream.backend.settings import Settings

    with tempfile.TemporaryDirectory(prefix="millstream-shards-") as tmp:
        settings = Settings(port=free_port(), data_dir=Path(tmp), redis_url=None, database_url=None)
        cluster = LocalCluster(
            settings, taskmanagers=TASKMANAGERS, slots=2, restart_taskmanagers=False, data_redis=data_servers
        )
        try:
            cluster.start()
            if not cluster.wait_ready():
                raise RuntimeError(f"the cluster did not start; see {tmp}/log")
            env = dict(cluster.env, MILLSTREAM_JOBMANAGER=f"http://127.0.0.1:{settings.port}")
            control = cluster.redis.pid
            data = [s.pid for s in cluster.data_redis]

            def submit(n: int) -> Run:
                time.sleep(SETTLE_S)
                c0, d0 = proc_cpu_s(control), [proc_cpu_s(p) for p in data]
                line = run([sys.executable, "-m", "millstream.backend.cli", "run", str(JOB), str(n), "2"], env)
                return Run(line, proc_cpu_s(control) - c0, [proc_cpu_s(p) - d for p, d in zip(data, d0)])

            yield submit
        finally:
            cluster.shutdown()


def measure(n: int = 2_000_000, pairs: int = 3) -> list[tuple[Run, Run]]:
    """``pairs`` (one server, three data servers) runs of the rolling count, after a warm-up on each."""
    with ExitStack() as stack:
        one = stack.enter_context(_cluster(0))
        three = stack.enter_context(_cluster(3))
        one(n), three(n)  # warm-up: the first job on a fresh cluster is slower
        return abba_pairs(pairs, lambda: one(n), lambda: three(n))


def describe(runs: list[tuple[Run, Run]], n: int) -> list[str]:
    ok = [(a, b) for a, b in runs if rate(a.line) and rate(b.line)]
    if not ok:
        return [f"data plane on 1 vs 3 Redis servers: failed ({runs[-1][0].line} / {runs[-1][1].line})"]
    million = n / 1e6
    speed = [rate(b.line) / rate(a.line) for a, b in ok]  # type: ignore[operator]
    one_rate = statistics.median(rate(a.line) for a, _ in ok)  # type: ignore[type-var]
    three_rate = statistics.median(rate(b.line) for _, b in ok)  # type: ignore[type-var]
    one_cpu = statistics.median(a.redis_cpu for a, _ in ok) / million
    three_total = statistics.median(b.redis_cpu for _, b in ok) / million
    three_control = statistics.median(b.control_cpu for _, b in ok) / million
    three_busiest = statistics.median(max(b.data_cpu) for _, b in ok) / million
    three_each = [statistics.median(b.data_cpu[i] for _, b in ok) / million for i in range(len(ok[0][1].data_cpu))]
    # One server is one thread: it saturates at one core.
    carries = 1.0 / one_cpu * 1e6 if one_cpu else float("inf")
    per_tm = one_rate / TASKMANAGERS
    lines = [
        f"data plane on 3 Redis servers / on 1 (rolling count, P=2, {TASKMANAGERS} TaskManagers x 2 slots, "
        f"N={n:,}), median of {len(ok)} interleaved pairs: throughput {statistics.median(speed):.2f} "
        f"({', '.join(f'{r:.2f}' for r in speed)}); {one_rate:,.0f} vs {three_rate:,.0f} records/s",
        f"Redis CPU per million records: one server {one_cpu:.2f} s; three data servers {three_total:.2f} s in all "
        f"(data servers {', '.join(f'{x:.2f}' for x in three_each)}, busiest {three_busiest:.2f}; control Redis "
        f"{three_control:.2f})",
        f"one Redis server saturates (one core) at about {carries:,.0f} records/s of this workload, "
        f"{carries / per_tm:.1f} TaskManagers of 2 slots at the {per_tm:,.0f} records/s each pushed here; "
        f"with k data servers about k times that (the busiest of 3 carried "
        f"{three_busiest / max(sum(three_each), 1e-9):.0%} of the data servers' CPU)",
    ]
    return lines


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(f"machine: {machine()}")
    for line in describe(measure(n, pairs), n):
        print(line, flush=True)
