"""``make bench``: the reference workload on a real local cluster, with peers measured in the same run.

Starts 2 TaskManagers (2 slots each) and a JobManager on a free port with a
private valkey, runs the keyed rolling word count at parallelism 2, and prints
records/s for Millstream, for Millstream's in-process mini-cluster, and for
Bytewax and PyFlink when their virtual environments exist (see shared/bench).
It adds the windowed job, the checkpoint overhead and checkpoint durations
(p50/p99 from ``/jobs/{id}/checkpoints``), recovery time after a TaskManager
SIGKILL (``recovery_bench.py``) and of an incremental chain restored from S3 with a round trip per
request (``remote_restore_bench.py``), the cost of checkpoints with large keyed state
(``large_state_bench.py``), state larger than memory on TaskManagers confined by a memory cgroup
(``larger_than_memory.py``; needs root), end-to-end latency from latency markers at 100k and 300k
records/s and their throughput cost (``latency_bench.py``), unless ``--skip-spark`` the Spark word count
(``spark_wordcount.py``), the data plane on 1 and on 3 Redis servers with Redis CPU per million
records (``data_servers_bench.py``), and the soak run (``soak.py``: a long checkpointed job plus
200 short jobs, memory at start and end). Because the machine is shared and noisy,
ratios between figures measured in this same run are the figures to compare.
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import statistics
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleave import abba_pairs  # noqa: E402
from machine import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
JOB = Path(__file__).with_name("rolling_count_job.py")
WINDOWED_JOB = Path(__file__).with_name("windowed_job.py")
PEER_DIR = ROOT.parent / "shared" / "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rate(line: str) -> float | None:
    m = re.search(r"records_per_s=(\d+)", line)
    return float(m.group(1)) if m else None


def run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 900, output: list[str] | None = None) -> str:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if output is not None:
        output.append(p.stdout)
    lines = [ln for ln in p.stdout.splitlines() if "records_per_s=" in ln]
    if p.returncode != 0 or not lines:
        return f"failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}"
    return lines[-1]


def checkpoint_durations(url: str, stdout: str) -> str:
    """End-to-end checkpoint duration p50/p99 of the finished job, from its REST checkpoint summary."""
    m = re.search(r"Job (\w+) FINISHED", stdout)
    if not m:
        return "failed: no finished job in the output"
    stats = httpx.get(f"{url}/jobs/{m.group(1)}/checkpoints", timeout=10).json()
    d, size = stats["summary"]["end_to_end_duration"], stats["summary"]["state_size"]
    return (
        f"p50 {d['p50']:.0f} ms, p99 {d['p99']:.0f} ms (min {d['min']}, max {d['max']}) over "
        f"{stats['counts']['completed']} completed checkpoints, state {size['p50']:,.0f} bytes"
    )


Submit = Callable[..., str]


@contextmanager
def local_cluster(taskmanagers: int, slots: int = 2) -> Iterator[Submit]:
    """A fresh local cluster; yields ``submit(n, parallelism, job, extra, inspect)`` to run jobs on it
    one after another (its ``url`` attribute is the REST address). ``inspect(rest url, job stdout)``
    runs after the job, before shutdown."""
    from millstream.backend.cluster_launcher import LocalCluster
    from millstream.backend.settings import Settings

    with tempfile.TemporaryDirectory(prefix="millstream-bench-") as tmp:
        settings = Settings(port=free_port(), data_dir=Path(tmp), redis_url=None, database_url=None)
        cluster = LocalCluster(settings, taskmanagers=taskmanagers, slots=slots, restart_taskmanagers=False)
        try:
            cluster.start()
            if not cluster.wait_ready():
                raise RuntimeError(f"the cluster did not start; see {tmp}/log")
            env = dict(cluster.env, MILLSTREAM_JOBMANAGER=f"http://127.0.0.1:{settings.port}")

            def submit(
                n: int,
                parallelism: int,
                job: Path = JOB,
                extra: tuple[str, ...] = (),
                inspect: Callable[[str, str], Any] | None = None,
            ) -> str:
                cmd = [sys.executable, "-m", "millstream.backend.cli", "run", str(job), str(n), str(parallelism), *extra]
                output: list[str] = []
                line = run(cmd, env, output=output)
                if inspect is not None and not line.startswith("failed"):
                    inspect(env["MILLSTREAM_JOBMANAGER"], output[0])
                return line

            submit.url = env["MILLSTREAM_JOBMANAGER"]  # type: ignore[attr-defined]
            submit.env = env  # type: ignore[attr-defined]  # for benchmarks that run the CLI themselves
            yield submit
        finally:
            cluster.shutdown()


def on_cluster(n: int, taskmanagers: int, parallelism: int, job: Path = JOB, extra: tuple[str, ...] = ()) -> str:
    """One job on a fresh local cluster."""
    try:
        with local_cluster(taskmanagers) as submit:
            return submit(n, parallelism, job, extra)
    except RuntimeError as e:
        return f"failed: {e}"


def interleaved(pairs: int, first: Callable[[Submit], str], second: Callable[[Submit], str]) -> list[tuple[str, str]]:
    """``pairs`` runs of two jobs on one cluster, so load that comes and goes on a shared machine
    hits both alike; the median of the per-pair ratios is the figure. A warm-up run goes first (the
    first job on a fresh cluster is slower) and the order alternates (ABBA), so neither job is
    always the one that runs first."""
    try:
        with local_cluster(2) as submit:
            first(submit)  # warm-up, not counted
            return abba_pairs(pairs, lambda: first(submit), lambda: second(submit))
    except RuntimeError as e:
        return [(f"failed: {e}", f"failed: {e}")]


def ratio_line(what: str, runs: list[tuple[str, str]]) -> str:
    ratios = [b / a for a, b in ((rate(x), rate(y)) for x, y in runs) if a and b]
    if not ratios:
        return f"{what}: failed"
    each = ", ".join(f"{r:.2f}" for r in ratios)
    return f"{what}: median {statistics.median(ratios):.2f} of {len(ratios)} interleaved pairs ({each})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2_000_000)
    ap.add_argument("--pyflink-n", type=int, default=200_000, help="PyFlink's process mode is slow; smaller N")
    ap.add_argument("--skip-peers", action="store_true", help="measure Millstream only")
    ap.add_argument("--skip-spark", action="store_true", help="leave out the Spark word count (minutes)")
    ap.add_argument("--skip-recovery", action="store_true", help="leave out the recovery-time runs")
    ap.add_argument("--pairs", type=int, default=3, help="interleaved pairs behind each ratio")
    ap.add_argument("--soak-minutes", type=float, default=30.0, help="the soak run's length (0 leaves it out)")
    ap.add_argument("--soak-jobs", type=int, default=200, help="short jobs run during the soak")
    ap.add_argument("--large-state-keys", type=int, default=1_000_000, help="distinct keys of the large-state runs (issue: 3,000,000)")
    ap.add_argument("--skip-large-state", action="store_true", help="leave out the large-state checkpoint runs")
    ap.add_argument("--larger-than-memory-keys", type=int, default=20_000_000, help="keys of the larger-than-memory runs")
    ap.add_argument("--skip-larger-than-memory", action="store_true", help="leave out the memory-cgroup runs (larger_than_memory.py)")
    ap.add_argument("--skip-seal", action="store_true", help="leave out sealed against unsealed clusters")
    ap.add_argument("--skip-latency", action="store_true", help="leave out the latency-marker runs (latency_bench.py)")
    ap.add_argument("--skip-data-servers", action="store_true", help="leave out 1 vs 3 data Redis servers (data_servers_bench.py)")
    args = ap.parse_args()
    n = args.n
    print(f"machine: {machine()}")
    results: dict[str, str] = {}

    # The windowed job against the rolling count, and the rolling count over 3N with exactly-once
    # checkpoints every second against the same run without them, each as interleaved pairs on one
    # cluster. The checkpointed runs' durations (1000 keys of state) come from their REST summaries.
    windowed = interleaved(
        args.pairs, lambda submit: submit(n, 2), lambda submit: submit(n, 2, WINDOWED_JOB)
    )
    durations: list[str] = []
    checkpointed = interleaved(
        args.pairs,
        lambda submit: submit(3 * n, 2),
        lambda submit: submit(
            3 * n, 2, JOB, ("millstream-checkpointed", "1000"),
            lambda url, out: durations.append(checkpoint_durations(url, out)),
        ),
    )
    results["Millstream, 2 TaskManagers over Redis, P=2"] = windowed[0][0]
    results["Millstream, P=2, N x3, no checkpoints"] = checkpointed[0][0]
    results["Millstream, P=2, N x3, exactly-once checkpoints every 1 s"] = checkpointed[0][1]
    results["Millstream windowed: 1 s tumbling event-time sum, P=2"] = windowed[0][1]
    # Do slots use separate cores? One TaskManager with 2 slots, at P=1 and at P=2.
    results["Millstream, 1 TaskManager x 2 slots, P=1"] = on_cluster(n // 2, taskmanagers=1, parallelism=1)
    results["Millstream, 1 TaskManager x 2 slots, P=2"] = on_cluster(n // 2, taskmanagers=1, parallelism=2)
    results["Millstream mini-cluster, in-process, P=2"] = run(
        [sys.executable, "-m", "millstream.backend.cli", "run", "--local", str(JOB), str(n), "2", "minicluster"]
    )
    bytewax = Path("/tmp/bytewax/bin/python")
    if bytewax.exists() and not args.skip_peers:
        results["Bytewax 0.21.1, 1 worker"] = run([str(bytewax), str(PEER_DIR / "bytewax_wordcount.py"), str(n)])
    pyflink = Path("/tmp/pyflink/bin/python")
    if pyflink.exists() and not args.skip_peers:
        # PyFlink starts `python` from PATH for its workers: it must be the peer venv's.
        env = dict(os.environ, PATH=f"{pyflink.parent}:{os.environ.get('PATH', '')}")
        results["PyFlink, thread mode, P=2"] = run(
            [str(pyflink), str(PEER_DIR / "pyflink_wordcount.py"), str(n), "2"], dict(env, MODE="thread")
        )
        results[f"PyFlink, process mode, P=2 (N={args.pyflink_n:,})"] = run(
            [str(pyflink), str(PEER_DIR / "pyflink_wordcount.py"), str(args.pyflink_n), "2"], dict(env, MODE="process")
        )
    one = rate(results["Millstream, 1 TaskManager x 2 slots, P=1"])
    two = rate(results["Millstream, 1 TaskManager x 2 slots, P=2"])
    if one and two:
        print(f"slot scaling on one TaskManager: P=2 runs {two / one:.2f}x the rate of P=1")
    print(ratio_line("checkpoint overhead: throughput with checkpoints every 1 s / without", checkpointed))
    for d in durations:
        print(f"checkpoint duration (end to end, 1000 keys of state, under full load): {d}")
    print(ratio_line("windowed / rolling count on the same cluster", windowed))
    # Sealing (issue 14): its per-buffer cost against the rate just measured, and end to end, a sealed
    # cluster against one started with the benchmark-only switch that turns sealing off (seal_cost.py).
    from mac_cost import describe as describe_mac, measure as measure_mac

    print(describe_mac(measure_mac(), rate(results["Millstream, 2 TaskManagers over Redis, P=2"])), flush=True)
    if not args.skip_seal:
        from seal_cost import describe as describe_seal, measure as measure_seal

        print(describe_seal(measure_seal(n, args.pairs)), flush=True)
    if not args.skip_data_servers:
        # The data plane on one Redis and sharded over three, and Redis CPU per million records (issue 18).
        from data_servers_bench import describe as describe_shards, measure as measure_shards

        for line in describe_shards(measure_shards(n, args.pairs), n):
            print(line, flush=True)
    base = rate(results.get("Bytewax 0.21.1, 1 worker", ""))
    print(f"{'system':48} {'records/s':>12} {'vs Bytewax':>11}")
    for name, line in results.items():
        r = rate(line)
        ratio = f"{r / base:.2f}x" if r and base else "-"
        print(f"{name:48} {r or 0:12,.0f} {ratio:>11}   {line}", flush=True)
    if not args.skip_latency:
        # End-to-end latency at 100k and 300k records/s, and the markers' cost (issue 17).
        from latency_bench import measure as measure_latency

        for line in measure_latency([100_000, 300_000], 20.0, n, args.pairs):
            print(line, flush=True)
    if not args.skip_large_state:
        from large_state_bench import measure as measure_large_state, measure_updates

        backends = ["hashmap", "hashmap-incremental", "rocksdb", "rocksdb-incremental"]
        for line in measure_large_state(args.large_state_keys, backends, 1):
            print(line, flush=True)
        # Keys as strings (user ids, words): the state the typed columns do not hold, pickled
        for line in measure_large_state(args.large_state_keys, ["hashmap-incremental", "rocksdb-incremental"], 1, key_type="string"):
            print(line, flush=True)
        keys = args.large_state_keys  # 1 % of them per checkpoint interval, for 20 s
        for family in ("rocksdb", "hashmap"):
            for line in measure_updates(keys, 1, keys / 100 / 2, 20.0, family):
                print(line, flush=True)
        # The heap's rolled compaction over a long run (about 95 checkpoints): the mean, not only the
        # typical checkpoint, and the model of many more (rolled_compaction_sim).
        for line in measure_updates(keys, 1, keys / 100 / 2, 190.0, "hashmap", tail=90):
            print(line, flush=True)
        import rolled_compaction_sim

        for updates in (0.001, 0.01, 0.05):
            print(f"rolled compaction model: {rolled_compaction_sim.describe(updates, steps=400)}", flush=True)
        # A rescaled restore 2 -> 3 of that state, from files in the format before and after
        # key-grouped state files (the restore step alone, both formats in this run).
        from large_state_restore_bench import measure as measure_restore

        for family in ("hashmap", "rocksdb"):
            for line in measure_restore(family, keys, 2, 3):
                print(line, flush=True)
    if not args.skip_larger_than_memory:
        # The keyed count on TaskManagers each confined by a memory cgroup: on-disk and heap backend.
        import larger_than_memory

        # incremental checkpoints, as a job with this much state runs them (full ones: 2.7x the time)
        ltm = larger_than_memory.parser().parse_args(
            ["--keys", str(args.larger_than_memory_keys), "--disk-backend", "rocksdb-incremental", "--disk-without-checkpoints"]
        )
        try:
            for line in larger_than_memory.measure(ltm):
                print(line, flush=True)
        except (OSError, RuntimeError) as e:  # no memory cgroup controller, or not root
            print(f"larger than memory: skipped ({e})", flush=True)
    if not args.skip_recovery:
        from recovery_bench import describe, measure_recovery

        for timeout in (None, 3000):
            label = "default (10 s)" if timeout is None else f"{timeout} ms"
            print(f"recovery, heartbeat timeout {label}: {describe(measure_recovery(timeout))}", flush=True)
        # a chain restored from S3 with a round trip per request: its files one after another and together
        subprocess.run([sys.executable, str(Path(__file__).with_name("remote_restore_bench.py"))], timeout=1800)
    if not args.skip_spark:
        # The Spark helper's benchmark prints its own figures and ratios.
        subprocess.run([sys.executable, str(Path(__file__).with_name("spark_wordcount.py"))], timeout=3600)
    if args.soak_minutes > 0:
        from soak import soak

        for line in soak(args.soak_minutes, args.soak_jobs):
            print(line, flush=True)


if __name__ == "__main__":
    main()
