"""Is a change slower? The reference workload on two checkouts, in interleaved pairs in one run.

Each checkout runs with its own ``.venv`` (``make install`` in it first) and starts its own fresh local
cluster (``run.on_cluster``: JobManager, 2 TaskManagers x 2 slots, a private valkey) for each job, so
the figures compare whole builds, sealing, scheduling and all. Pairs alternate the order (ABBA) to
spread the shared machine's load alike; the median of the per-pair ratios is the figure.

Usage: ``python benchmarks/compare_trees.py BASELINE_TREE [CANDIDATE_TREE] [-n 2000000] [--pairs 3]
[--job rolling|windowed|checkpointed|one-taskmanager-p1|one-taskmanager-p2]``
(the candidate defaults to this checkout). Create a baseline with ``git worktree add /tmp/base <commit>``.
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleave import abba_pairs  # noqa: E402
from machine import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ONE_JOB = (
    "import sys; from pathlib import Path; sys.path.insert(0, 'benchmarks'); from run import on_cluster; "
    "print(on_cluster({n}, {taskmanagers}, {parallelism}, Path('benchmarks/{job}'), {extra!r}))"
)
# make bench's cluster workloads: (job script, its extra arguments, TaskManagers, parallelism, N multiple)
JOBS = {
    "rolling": ("rolling_count_job.py", (), 2, 2, 1),
    "windowed": ("windowed_job.py", (), 2, 2, 1),
    "checkpointed": ("rolling_count_job.py", ("millstream-checkpointed", "1000"), 2, 2, 3),
    "one-taskmanager-p1": ("rolling_count_job.py", (), 1, 1, 0.5),
    "one-taskmanager-p2": ("rolling_count_job.py", (), 1, 2, 0.5),
}


def one_run(tree: Path, n: int, workload: str = "rolling") -> float | None:
    job, extra, taskmanagers, parallelism, times = JOBS[workload]
    code = ONE_JOB.format(
        n=int(n * times), taskmanagers=taskmanagers, parallelism=parallelism, job=job, extra=extra
    )
    p = subprocess.run(
        [str(tree / ".venv" / "bin" / "python"), "-c", code],
        cwd=tree, capture_output=True, text=True, timeout=900,
    )
    m = re.search(r"records_per_s=(\d+)", p.stdout)
    if not m:
        print(f"  {tree}: failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}", flush=True)
        return None
    return float(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("baseline", type=Path)
    ap.add_argument("candidate", type=Path, nargs="?", default=ROOT)
    ap.add_argument("-n", type=int, default=2_000_000)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--job", choices=sorted(JOBS), default="rolling", help="which of make bench's cluster workloads")
    args = ap.parse_args()
    base, cand = args.baseline.resolve(), args.candidate.resolve()
    print(f"machine: {machine()}")
    print(f"workload: {args.job}, N={args.n:,}")
    one_run(base, args.n // 4, args.job)  # warm-ups (first runs pay for cold caches), not counted
    one_run(cand, args.n // 4, args.job)
    ratios = []
    for i, (b, c) in enumerate(abba_pairs(
        args.pairs, lambda: one_run(base, args.n, args.job), lambda: one_run(cand, args.n, args.job)
    )):
        print(f"  pair {i + 1}: baseline {b or 0:,.0f}/s, candidate {c or 0:,.0f}/s", flush=True)
        if b and c:
            ratios.append(c / b)
    if ratios:
        each = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"candidate / baseline records/s: median {statistics.median(ratios):.2f} of {len(ratios)} pairs ({each})")
    else:
        print("candidate / baseline: failed")


if __name__ == "__main__":
    main()
