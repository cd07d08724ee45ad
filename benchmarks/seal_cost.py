"""What sealing costs end to end (issue 14): the reference workload on a sealed cluster and on an
unsealed one, in interleaved pairs, and the ratio of their throughputs.

Two local clusters (2 TaskManagers x 2 slots, private valkeys) run side by side, idle but for the job
being measured: one as always, one started with ``MILLSTREAM_BENCHMARK=1`` and
``MILLSTREAM_BENCHMARK_UNSEALED=1``, the benchmark-only switch that turns sealing and checking off in
every process of that cluster (the CLI refuses the switch without the flag, off loopback or with a
token). The rolling word count runs on each in turn, a warm-up first and then ABBA pairs, so load that
comes and goes on a shared machine hits both alike, and each run starts after the other cluster had a
few seconds to settle (a job's end leaves its cluster busy for a moment: without the pause the run
after a switch of cluster was the slow one of every pair). Two figures, each the median of the
per-pair ratios sealed / unsealed: throughput (1.00: sealing costs nothing), and records per CPU
second of the whole cluster (JobManager, TaskManagers, slots, valkey) and the client, which the other
work on a shared machine moves much less than wall-clock time.

Run alone: ``python benchmarks/seal_cost.py [N [pairs]]``; ``make bench`` runs it too.
"""
from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator

import psutil
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleave import abba_pairs  # noqa: E402
from machine import machine  # noqa: E402
from run import JOB, free_port, rate, run  # noqa: E402

from millstream.engine import redis_keys  # noqa: E402

_SWITCH = {"MILLSTREAM_BENCHMARK": "1", "MILLSTREAM_BENCHMARK_UNSEALED": "1"}
SETTLE_S = 4.0  # before each run: the previous job's cluster finishes its after-job work

Run = tuple[str, float]  # the job's result line, CPU seconds of its cluster and client


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            procs = [psutil.Process(pid)]
            procs += procs[0].children(recursive=True)
        except psutil.Error:
            continue
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
    return total


def _client_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)  # the `millstream run` clients, once waited for
    return r.ru_utime + r.ru_stime


@contextmanager
def _cluster(unsealed: bool) -> Iterator[Callable[[int], Run]]:
    """A fresh local cluster, sealed or not; yields ``submit(n)`` running the rolling count at P=2."""
    from millstream.backend.cluster_launcher import LocalCluster
    from millstream.backend.settings import Settings

    with tempfile.TemporaryDirectory(prefix="millstream-seal-") as tmp:
        settings = Settings(port=free_port(), data_dir=Path(tmp), redis_url=None, database_url=None)
        cluster = LocalCluster(settings, taskmanagers=2, slots=2, restart_taskmanagers=False)
        saved = {k: os.environ.get(k) for k in _SWITCH}
        try:
            if unsealed:
                os.environ.update(_SWITCH)  # the launcher hands its environment to the processes it starts
            cluster.start()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if not cluster.wait_ready():
                raise RuntimeError(f"the cluster did not start; see {tmp}/log")
            env = dict(cluster.env, MILLSTREAM_JOBMANAGER=f"http://127.0.0.1:{settings.port}")
            _check(env["REDIS_URL"], unsealed)
            pids = [c.proc.pid for c in cluster.children if c.proc is not None] + [cluster.redis.pid]

            def submit(n: int) -> Run:
                time.sleep(SETTLE_S)
                cpu0, client0 = _cpu(pids), _client_cpu()
                line = run([sys.executable, "-m", "millstream.backend.cli", "run", str(JOB), str(n), "2"], env)
                return line, _cpu(pids) - cpu0 + _client_cpu() - client0

            yield submit
        finally:
            cluster.shutdown()


def _check(redis_url: str, unsealed: bool) -> None:
    """The switch took effect, and only where meant: a TaskManager's heartbeat is sealed or not."""
    client = redis.Redis.from_url(redis_url)
    try:
        tm = next(iter(client.hkeys(redis_keys.TASKMANAGERS))).decode()
        sealed = (client.get(redis_keys.taskmanager_heartbeat(tm)) or b"")[:1] == b"\xa1"
    finally:
        client.close()
    if sealed == unsealed:
        raise RuntimeError(f"the {'unsealed' if unsealed else 'sealed'} cluster's heartbeats are {'' if sealed else 'not '}sealed")


def measure(n: int = 2_000_000, pairs: int = 3) -> list[tuple[Run, Run]]:
    """``pairs`` (sealed, unsealed) result lines of the rolling count, after one warm-up run on each."""
    with ExitStack() as stack:
        sealed = stack.enter_context(_cluster(False))
        unsealed = stack.enter_context(_cluster(True))
        sealed(n), unsealed(n)  # warm-up: the first job on a fresh cluster is slower
        return abba_pairs(pairs, lambda: sealed(n), lambda: unsealed(n))


def describe(runs: list[tuple[Run, Run]]) -> str:
    ok = [(a, b) for a, b in runs if rate(a[0]) and rate(b[0])]
    if not ok:
        return f"sealing, end to end: failed ({runs[-1]})"
    speed = [rate(a[0]) / rate(b[0]) for a, b in ok]  # type: ignore[operator]
    per_cpu = [b[1] / a[1] for a, b in ok]  # same records: CPU unsealed / sealed is records-per-CPU-second sealed / unsealed
    med, cpu_med = statistics.median(speed), statistics.median(per_cpu)
    return (
        f"sealing, end to end (rolling count, P=2, 2 TaskManagers), sealed / unsealed, median of {len(ok)} "
        f"interleaved pairs: throughput {med:.3f} ({', '.join(f'{r:.3f}' for r in speed)}), a cost of "
        f"{100 * (1 - med):.1f}%; records per CPU second {cpu_med:.3f} ({', '.join(f'{r:.3f}' for r in per_cpu)}), "
        f"a cost of {100 * (1 - cpu_med):.1f}%; median {statistics.median(rate(a[0]) for a, _ in ok):,.0f} vs "
        f"{statistics.median(rate(b[0]) for _, b in ok):,.0f} records/s, "
        f"{statistics.median(a[1] for a, _ in ok):.1f} vs {statistics.median(b[1] for _, b in ok):.1f} CPU s per run"
    )


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(f"machine: {machine()}", flush=True)
    runs = measure(n, pairs)
    for a, b in runs:
        print(f"  sealed:   {a[0]} cpu_s={a[1]:.2f}\n  unsealed: {b[0]} cpu_s={b[1]:.2f}", flush=True)
    print(describe(runs), flush=True)
