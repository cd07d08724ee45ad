"""What sealing costs end to end (issue 14): the reference workload on a sealed cluster and on an
unsealed one, in interleaved pairs, and the ratio of their throughputs.

Two local clusters (2 TaskManagers x 2 slots, private valkeys) run side by side, idle but for the job
being measured: one as always, one started with ``MILLSTREAM_BENCHMARK=1`` and
``MILLSTREAM_BENCHMARK_UNSEALED=1``, the benchmark-only switch that turns sealing and checking off in
every process of that cluster (the CLI refuses the switch without the flag, off loopback or with a
token). The rolling word count runs on each in turn, a warm-up first and then ABBA pairs, so load that
comes and goes on a shared machine hits both alike; the figure is the median of the per-pair ratios
sealed / unsealed (1.00: sealing costs nothing).

Run alone: ``python benchmarks/seal_cost.py [N [pairs]]``; ``make bench`` runs it too.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402
from run import JOB, free_port, rate, run  # noqa: E402

from engine import redis_keys  # noqa: E402

_SWITCH = {"MILLSTREAM_BENCHMARK": "1", "MILLSTREAM_BENCHMARK_UNSEALED": "1"}


@contextmanager
def _cluster(unsealed: bool) -> Iterator[Callable[[int], str]]:
    """A fresh local cluster, sealed or not; yields ``submit(n)`` running the rolling count at P=2."""
    from backend.cluster_launcher import LocalCluster
    from backend.settings import Settings

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
            yield lambda n: run([sys.executable, "-m", "backend.cli", "run", str(JOB), str(n), "2"], env)
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


def measure(n: int = 2_000_000, pairs: int = 3) -> list[tuple[str, str]]:
    """``pairs`` (sealed, unsealed) result lines of the rolling count, after one warm-up run on each."""
    with ExitStack() as stack:
        sealed = stack.enter_context(_cluster(False))
        unsealed = stack.enter_context(_cluster(True))
        sealed(n), unsealed(n)  # warm-up: the first job on a fresh cluster is slower
        runs = []
        for i in range(pairs):
            if i % 2 == 0:
                a = sealed(n)
                b = unsealed(n)
            else:
                b = unsealed(n)
                a = sealed(n)
            runs.append((a, b))
        return runs


def describe(runs: list[tuple[str, str]]) -> str:
    pairs = [(rate(a), rate(b)) for a, b in runs]
    ratios = [a / b for a, b in pairs if a and b]
    if not ratios:
        return f"sealing, end to end: failed ({runs[-1]})"
    each = ", ".join(f"{r:.3f}" for r in ratios)
    med = statistics.median(ratios)
    sealed_rate = statistics.median(a for a, b in pairs if a and b)
    unsealed_rate = statistics.median(b for a, b in pairs if a and b)
    return (
        f"sealing, end to end (rolling count, P=2, 2 TaskManagers): sealed / unsealed throughput median {med:.3f} "
        f"of {len(ratios)} interleaved pairs ({each}), a cost of {100 * (1 - med):.1f}%; "
        f"median {sealed_rate:,.0f} vs {unsealed_rate:,.0f} records/s"
    )


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print(f"machine: {machine()}", flush=True)
    runs = measure(n, pairs)
    for a, b in runs:
        print(f"  sealed:   {a}\n  unsealed: {b}", flush=True)
    print(describe(runs), flush=True)
