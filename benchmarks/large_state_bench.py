"""Large keyed state (issue 16): what checkpoints every 2 s cost when the state is big.

On a local cluster of 2 TaskManagers x 1 slot, ``large_state_job.py`` counts N records over N
distinct keys at parallelism 2, on each backend, with exactly-once checkpoints every 2 s and
without, as interleaved pairs. Reported per backend: the throughput ratio (checkpointed /
uncheckpointed, median of the pairs), the bytes written per checkpoint (``state_size`` of the
completed checkpoints), and the synchronous (task-thread) pause of each checkpoint (its slowest
subtask), p50 and p99 over the checkpoints, from ``/jobs/{id}/checkpoints/details/{cid}/subtasks/{vid}``,
polled while the job runs (the REST history keeps only the last 10 checkpoints).

Run alone: ``python benchmarks/large_state_bench.py [--keys 1000000] [--backends hashmap,rocksdb]``;
``--keys 3000000`` is the issue's size (minutes per run on the on-disk backend here).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402
from run import Submit, local_cluster, rate  # noqa: E402

JOB = Path(__file__).with_name("large_state_job.py")
INTERVAL_MS = 2000


class CheckpointSampler:
    """Polls the REST API while a job runs and keeps every completed checkpoint's figures."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=10)
        self.seen: dict[int, dict[str, Any]] = {}  # checkpoint id -> {"size": bytes, "sync": [ms per subtask]}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "CheckpointSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.http.close()

    def _loop(self) -> None:
        jid = None
        while True:
            stopping = self._stop.is_set()
            try:
                if jid is None:
                    jobs = self.http.get("/jobs/overview").json()["jobs"]
                    running = [j["jid"] for j in jobs if j["state"] == "RUNNING"]  # jobs run one at a time
                    jid = running[0] if running else None
                if jid is not None:
                    self._sample(jid)
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            if stopping:
                return
            self._stop.wait(0.5)

    def _sample(self, jid: str) -> None:
        stats = self.http.get(f"/jobs/{jid}/checkpoints").json()
        for entry in stats.get("history", ()):
            cid = entry["id"]
            if entry["status"] != "COMPLETED" or cid in self.seen:
                continue
            syncs: list[int] = []
            for vid in entry.get("tasks", {}):
                sub = self.http.get(f"/jobs/{jid}/checkpoints/details/{cid}/subtasks/{vid}").json()
                syncs += [s["checkpoint"]["sync"] for s in sub.get("subtasks", ()) if s.get("status") == "completed"]
            self.seen[cid] = {"size": entry["state_size"], "sync": syncs}


def p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))] if xs else float("nan")


def measure(keys: int, backends: list[str], pairs: int) -> list[str]:
    lines: list[str] = []
    with local_cluster(2, slots=1) as submit:
        for backend in backends:
            samples: list[CheckpointSampler] = []

            def without() -> str:
                return _run(submit, keys, backend, 0)

            def with_checkpoints() -> str:
                return _run(submit, keys, backend, INTERVAL_MS, samples)

            without()  # warm-up, not counted
            runs: list[tuple[str, str]] = []
            for i in range(pairs):
                if i % 2 == 0:
                    a, b = without(), with_checkpoints()
                else:
                    b, a = with_checkpoints(), without()
                runs.append((a, b))
            ratios = [rb / ra for ra, rb in ((rate(x), rate(y)) for x, y in runs) if ra and rb]
            sizes = [c["size"] for s in samples for c in s.seen.values()]
            # The longest task-thread pause of each checkpoint (its subtasks pause one after another).
            syncs = [max(c["sync"]) for s in samples for c in s.seen.values() if c["sync"]]
            each = ", ".join(f"{r:.2f}" for r in ratios)
            lines.append(
                f"large state, {backend}, {keys:,} keys, checkpoints every {INTERVAL_MS // 1000} s: "
                + (f"throughput ratio median {statistics.median(ratios):.2f} of {len(ratios)} pairs ({each})" if ratios else "failed")
                + f"; {len(sizes)} completed checkpoints, bytes per checkpoint p50 "
                + (f"{statistics.median(sizes):,.0f} (max {max(sizes):,})" if sizes else "-")
                + "; task-thread (sync) pause per checkpoint (its slowest subtask) p50 "
                + (f"{statistics.median(syncs):.0f} ms, p99 {p99(syncs):.0f} ms, max {max(syncs)} ms" if syncs else "-")
            )
            for a, b in runs:
                lines.append(f"    without: {a}\n    with:    {b}")
    return lines


def _run(submit: Submit, keys: int, backend: str, interval_ms: int, samples: list | None = None) -> str:
    extra = (str(keys), backend, str(interval_ms))
    if samples is None:
        return submit(keys, 2, JOB, extra)
    sampler = CheckpointSampler(submit.url)  # type: ignore[attr-defined]
    with sampler:
        line = submit(keys, 2, JOB, extra)
    samples.append(sampler)
    return line


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000, help="records = distinct keys (the issue: 3,000,000)")
    ap.add_argument("--backends", default="hashmap,rocksdb")
    ap.add_argument("--pairs", type=int, default=2)
    args = ap.parse_args()
    print(f"machine: {machine()}", flush=True)
    for line in measure(args.keys, args.backends.split(","), args.pairs):
        print(line, flush=True)


if __name__ == "__main__":
    main()
