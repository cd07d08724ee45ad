"""Large keyed state (issue 16): what checkpoints every 2 s cost when the state is big.

On a local cluster of 2 TaskManagers x 1 slot, ``large_state_job.py`` counts N records over N
distinct keys at parallelism 2, on each backend, with exactly-once checkpoints every 2 s and
without, as interleaved pairs. Reported per backend: the throughput ratio (checkpointed /
uncheckpointed, median of the pairs), the bytes written per checkpoint (``state_size`` of the
completed checkpoints), and the synchronous (task-thread) pause of each checkpoint (its slowest
subtask), p50 and p99 over the checkpoints, from ``/jobs/{id}/checkpoints/details/{cid}/subtasks/{vid}``,
read once each job has ended (the cluster keeps a history of ``HISTORY`` checkpoints a job), and the CPU
seconds the cluster's processes spent on each run (``cluster_cpu_s``; checkpointed / uncheckpointed,
a figure the shared machine's load moves far less than the wall time).

``rocksdb-incremental`` is the on-disk backend with incremental checkpoints; with ``rocksdb`` it runs
as an A/B in the same rounds. The 1 %-per-interval workload (``large_state_updates_job.py``) sets
the bytes each checkpoint writes, full and incremental, against the bytes of state that changed.

Run alone: ``python benchmarks/large_state_bench.py [--keys 1000000] [--backends hashmap,rocksdb,rocksdb-incremental]
[--updates-keys 1000000] [--passes 4] [--key-type string] [--detail]``; ``--keys 3000000`` is the issue's size
(minutes per run on the on-disk backend here). ``--key-type string`` keys the count by strings
(``user-<n>``) instead of ints; ``--detail`` prints every completed checkpoint's figures.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402
from run import Submit, local_cluster, rate  # noqa: E402

JOB = Path(__file__).with_name("large_state_job.py")
INTERVAL_MS = 2000
HISTORY = 1000  # checkpoints a job's REST history keeps on the benchmark's cluster (web.checkpoints.history)


@contextlib.contextmanager
def _cluster() -> Iterator[Submit]:
    """The benchmark's cluster: 2 TaskManagers x 1 slot, keeping every checkpoint of a run in its history."""
    before = os.environ.get("MILLSTREAM_CHECKPOINTS_HISTORY")
    os.environ["MILLSTREAM_CHECKPOINTS_HISTORY"] = str(HISTORY)  # the cluster's processes inherit it
    try:
        with local_cluster(2, slots=1) as submit:
            yield submit
    finally:
        if before is None:
            os.environ.pop("MILLSTREAM_CHECKPOINTS_HISTORY", None)
        else:
            os.environ["MILLSTREAM_CHECKPOINTS_HISTORY"] = before


class CheckpointSampler:
    """Every completed checkpoint's figures of the job run inside its ``with`` block, read from the REST
    API once the job has ended: a client polling the JobManager while the job runs would load the
    2-core machine during the checkpointed runs only. The cluster keeps a long enough history
    (``HISTORY``)."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)
        # checkpoint id -> {"size": state bytes, "written": checkpointed bytes, "trigger": ms, "sync": [ms per subtask]}
        self.seen: dict[int, dict[str, Any]] = {}
        self._names: dict[str, str] = {}  # vertex id -> name
        self.failed = 0
        self._before: set[str] = set()

    def _jobs(self) -> list[dict[str, Any]]:
        return self.http.get("/jobs/overview").json()["jobs"]

    def __enter__(self) -> "CheckpointSampler":
        self._before = {j["jid"] for j in self._jobs()}
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            ran = [j for j in self._jobs() if j["jid"] not in self._before]  # jobs run one at a time
            if ran:
                self._sample(max(ran, key=lambda j: j["start-time"])["jid"])
        except (httpx.HTTPError, KeyError, ValueError) as e:
            print(f"reading the checkpoints failed: {e!r}", file=sys.stderr, flush=True)
        finally:
            self.http.close()

    def _vertex_name(self, jid: str, vid: str) -> str:
        if vid not in self._names:
            self._names.update({v["id"]: v["name"] for v in self.http.get(f"/jobs/{jid}").json().get("vertices", ())})
        return self._names.get(vid, vid)

    def _sample(self, jid: str) -> None:
        stats = self.http.get(f"/jobs/{jid}/checkpoints").json()
        for entry in stats.get("history", ()):
            cid = entry["id"]
            if entry["status"] != "COMPLETED" or cid in self.seen:
                continue
            syncs: list[int] = []
            asyncs: list[int] = []
            slowest = (-1, "")  # (sync ms, vertex): which task paused longest, to tell a backend from a sink
            for vid in entry.get("tasks", {}):
                sub = self.http.get(f"/jobs/{jid}/checkpoints/details/{cid}/subtasks/{vid}").json()
                done = [s["checkpoint"]["sync"] for s in sub.get("subtasks", ()) if s.get("status") == "completed"]
                syncs += done
                asyncs += [s["checkpoint"]["async"] for s in sub.get("subtasks", ()) if s.get("status") == "completed"]
                if done and max(done) > slowest[0]:
                    slowest = (max(done), self._vertex_name(jid, vid))
            self.seen[cid] = {
                "size": entry["state_size"],
                "written": entry.get("checkpointed_size", entry["state_size"]),
                "trigger": entry["trigger_timestamp"],
                "sync": syncs,
                "async": asyncs,
                "duration": entry.get("end_to_end_duration"),
                "slowest": slowest,
            }
        self.failed = stats.get("counts", {}).get("failed", 0)


def p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))] if xs else float("nan")


def _rotated(pairs: int, variants: list[Callable[[], str]]) -> list[list[str]]:
    """``pairs`` rounds of every variant, the order rotated each round, so load that comes and goes
    on the shared machine hits every variant alike and none always runs first."""
    rounds = []
    for i in range(pairs):
        order = list(range(len(variants)))
        order = order[i % len(order):] + order[: i % len(order)]
        out: dict[int, str] = {}
        for j in order:
            out[j] = variants[j]()
        rounds.append([out[j] for j in range(len(variants))])
    return rounds


def _figures(samples: list["CheckpointSampler"]) -> str:
    sizes = [c["size"] for s in samples for c in s.seen.values()]
    written = [c["written"] for s in samples for c in s.seen.values()]
    # The longest task-thread pause of each checkpoint (its subtasks pause one after another).
    syncs = [max(c["sync"]) for s in samples for c in s.seen.values() if c["sync"]]
    return (
        f"{len(sizes)} completed checkpoints, state size p50 "
        + (f"{statistics.median(sizes):,.0f} (max {max(sizes):,})" if sizes else "-")
        + ", bytes written per checkpoint (checkpointed size) p50 "
        + (f"{statistics.median(written):,.0f} (max {max(written):,})" if written else "-")
        + "; task-thread (sync) pause per checkpoint (its slowest subtask) p50 "
        + (f"{statistics.median(syncs):.0f} ms, p99 {p99(syncs):.0f} ms, max {max(syncs)} ms" if syncs else "-")
        + _slowest(samples)
    )


def _detail(samples: list["CheckpointSampler"]) -> list[str]:
    """One line per completed checkpoint of each run (``--detail``): where a round's cost went."""
    lines = []
    for i, s in enumerate(samples):
        t0 = min((c["trigger"] for c in s.seen.values()), default=0)
        lines.append(f"    run {i + 1}: {len(s.seen)} completed, {s.failed} failed")
        for cid, c in sorted(s.seen.items()):
            lines.append(
                f"      checkpoint {cid} at +{(c['trigger'] - t0) / 1000:.1f} s: {c['duration']} ms end to end, "
                f"written {c['written']:,} of {c['size']:,} bytes, sync {c['sync']} ms, async {c['async']} ms"
            )
    return lines


def _slowest(samples: list["CheckpointSampler"]) -> str:
    """Where the longest pause was: its checkpoint's number, task and bytes written."""
    done = [(c["slowest"][0], cid, c) for s in samples for cid, c in s.seen.items() if c["sync"]]
    if not done:
        return ""
    _, cid, c = max(done, key=lambda d: d[0])
    return f" (checkpoint {cid}, {c['slowest'][1]}, {c['written']:,} bytes written)"


def measure(
    keys: int, backends: list[str], pairs: int, passes: int = 1, detail: bool = False, key_type: str = "long"
) -> list[str]:
    """Per backend: the job without checkpoints and with checkpoints every 2 s, in rotated rounds on
    one cluster. ``rocksdb`` and ``rocksdb-incremental`` together run as one A/B: without, full and
    incremental checkpoints in each round (and ``hashmap-forked`` with ``hashmap``)."""
    lines: list[str] = []
    groups: list[list[str]] = []
    for b in backends:
        if any(b.endswith(v) and b[: -len(v)] in backends for v in _VARIANTS):
            continue  # runs with its full-checkpoint backend's group
        groups.append([b, *(b + v for v in _VARIANTS if b + v in backends)])
    with _cluster() as submit:
        for group in groups:
            samples: dict[str, list[CheckpointSampler]] = {b: [] for b in group}
            variants: list[Callable[[], str]] = [lambda: _run(submit, keys, group[0], 0, passes=passes, key_type=key_type)]
            for b in group:
                variants.append(lambda b=b: _run(submit, keys, b, INTERVAL_MS, samples[b], passes, key_type))
            variants[0]()  # warm-up, not counted
            rounds = _rotated(pairs, variants)
            for k, b in enumerate(group, start=1):
                ratios = [rate(r[k]) / rate(r[0]) for r in rounds if rate(r[0]) and rate(r[k])]
                each = ", ".join(f"{x:.2f}" for x in ratios)
                cpus = [cpu(r[k]) / cpu(r[0]) for r in rounds if cpu(r[0]) and cpu(r[k])]
                lines.append(
                    f"large state, {b}, {keys:,} {key_type.replace('-', ' ') + ' ' if key_type != 'long' else ''}keys"
                    + (f" x {passes} passes" if passes > 1 else "")
                    + f", checkpoints every {INTERVAL_MS // 1000} s: "
                    + (f"throughput ratio median {statistics.median(ratios):.2f} of {len(ratios)} rounds ({each})" if ratios else "failed")
                    + (f", cluster CPU seconds ratio median {statistics.median(cpus):.2f} ({', '.join(f'{x:.2f}' for x in cpus)})" if cpus else "")
                    + "; " + _figures(samples[b])
                )
                if detail:
                    lines += _detail(samples[b])
            for i, b in enumerate(group[1:], start=2):  # each variant against the group's first
                ab = [rate(r[i]) / rate(r[1]) for r in rounds if rate(r[1]) and rate(r[i])]
                if ab:
                    lines.append(f"large state, {keys:,} keys: {b} / {group[0]} checkpoints throughput, median {statistics.median(ab):.2f} ({', '.join(f'{x:.2f}' for x in ab)})")
            for r in rounds:
                lines.append("    without: " + r[0] + "".join(f"\n    {b}: {x}" for b, x in zip(group, r[1:])))
    return lines


UPDATES_JOB = Path(__file__).with_name("large_state_updates_job.py")


def measure_updates(
    keys: int, pairs: int, updates_per_s: float, seconds: float, family: str = "rocksdb", tail: int = 5
) -> list[str]:
    """The 1 %-per-interval workload: bytes each checkpoint writes, full against incremental, set
    against the bytes of state that changed since the checkpoint before. Changed bytes: the keys
    updated between the two checkpoints' triggers (updates_per_s x the time between them, each a
    different key) times the bytes per entry of a full checkpoint of the same state. ``tail``: the
    last checkpoints of each run counted (all in the update phase); with more of them than a chain's
    length the mean and max show what the periodic rewrites (bases, merges) add."""
    lines: list[str] = []
    full_b, inc_b = family, f"{family}-incremental"  # rocksdb or hashmap, full against incremental
    samples: dict[str, list[CheckpointSampler]] = {full_b: [], inc_b: []}
    with _cluster() as submit:

        def one(backend: str) -> str:
            sampler = CheckpointSampler(submit.url)  # type: ignore[attr-defined]
            extra = (backend, str(INTERVAL_MS), str(updates_per_s), str(seconds))
            with sampler:
                line = submit(keys, 2, UPDATES_JOB, extra)  # KEYS P BACKEND ...
            samples[backend].append(sampler)
            return line

        rounds = _rotated(pairs, [lambda: one(full_b), lambda: one(inc_b)])
    full_sizes = [c["size"] for s in samples[full_b] for c in s.seen.values()]
    per_entry = max(full_sizes) / keys if full_sizes else float("nan")
    for backend, ss in samples.items():
        written, changed = [], []
        for s in ss:
            cps = sorted(s.seen.items())
            # Checkpoints of the update phase only: the last ones, each after the one before it.
            for (_, prev), (_, cur) in list(zip(cps, cps[1:]))[-tail:]:
                updated = updates_per_s * max(0, cur["trigger"] - prev["trigger"]) / 1000
                written.append(cur["written"])
                changed.append(updated * per_entry)
        ratio = [w / c for w, c in zip(written, changed) if c]
        lines.append(
            f"large state, 1 % of {keys:,} keys updated per {INTERVAL_MS // 1000} s interval ({updates_per_s:,.0f} updates/s), {backend}: "
            + (
                f"bytes written per checkpoint p50 {statistics.median(written):,.0f}, state changed per interval p50 "
                f"{statistics.median(changed):,.0f} ({per_entry:.0f} bytes per entry), written / changed p50 {statistics.median(ratio):.2f}, "
                f"mean {sum(written) / sum(changed):.2f}, max {max(ratio):.2f} over {len(written)} checkpoints"
                if ratio
                else "no checkpoints in the update phase"
            )
            + "; " + _figures(ss)
        )
    for r in rounds:
        lines.append(f"    full: {r[0]}\n    incremental: {r[1]}")
    return lines


def cluster_cpu() -> float:
    """CPU seconds (user + system) the local cluster's processes have used so far: every process this
    benchmark started, and the children they reaped (a forked snapshot's). On a shared machine the
    wall time of a run moves with other work; the CPU it costs much less."""
    import psutil

    total = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


_VARIANTS = ("-forked", "-incremental")  # of a backend's checkpoints, run in its group

def cpu_by_process() -> dict[str, float]:
    """``cluster_cpu`` per process, labelled by its role (JobManager, TaskManager, slot, Redis...)."""
    import psutil

    out: dict[str, float] = {}
    for p in psutil.Process().children(recursive=True):
        try:
            t = p.cpu_times()
            args = p.cmdline()
        except psutil.Error:
            continue
        role = next((a for a in args if a in ("jobmanager", "taskmanager")), None) or ("slot" if any("spawn_main" in a for a in args) else p.name())
        label = f"{role}:{p.pid}"
        out[label] = t.user + t.system + t.children_user + t.children_system
    return out


def cpu(line: str) -> float | None:
    m = re.search(r"cluster_cpu_s=([0-9.]+)", line)
    return float(m.group(1)) if m else None


def _run(
    submit: Submit, keys: int, backend: str, interval_ms: int, samples: list | None = None, passes: int = 1, key_type: str = "long"
) -> str:
    """``passes``: records per key (the job counts ``keys * passes`` records): a run long enough to
    hold several checkpoints where one pass over the keys takes little more than an interval."""
    extra = (str(keys), backend, str(interval_ms), key_type)
    before = cluster_cpu()
    by_process = cpu_by_process()
    if samples is None:
        line = submit(keys * passes, 2, JOB, extra)
    else:
        sampler = CheckpointSampler(submit.url)  # type: ignore[attr-defined]
        with sampler:
            line = submit(keys * passes, 2, JOB, extra)
        samples.append(sampler)
    spent = {k: v - by_process.get(k, 0.0) for k, v in cpu_by_process().items()}
    shares = " ".join(f"{k}={v:.1f}" for k, v in sorted(spent.items(), key=lambda kv: -kv[1]) if v >= 0.1)
    return f"{line} cluster_cpu_s={cluster_cpu() - before:.1f} ({shares})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000, help="records = distinct keys (the issue: 3,000,000)")
    ap.add_argument("--backends", default="hashmap,hashmap-incremental,rocksdb,rocksdb-incremental")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--passes", type=int, default=1, help="records per key (1: the issue's workload, every record a new key)")
    ap.add_argument("--updates-keys", type=int, default=1_000_000, help="keys of the 1 %%-per-interval workload (0: skip it)")
    ap.add_argument("--updates-seconds", type=float, default=20.0, help="how long that workload updates")
    ap.add_argument("--updates-tail", type=int, default=5, help="the last checkpoints of each run that workload counts")
    ap.add_argument("--updates-backends", default="rocksdb,hashmap", help="backends of that workload, each full against incremental")
    ap.add_argument("--detail", action="store_true", help="print every completed checkpoint's figures")
    ap.add_argument(
        "--key-type", choices=("long", "string", "string-untyped"), default="long",
        help="string: keys as 'user-<n>' strings; string-untyped: the same, keyed with no key type",
    )
    args = ap.parse_args()
    print(f"machine: {machine()}", flush=True)
    if args.keys:
        for line in measure(args.keys, args.backends.split(","), args.pairs, args.passes, args.detail, args.key_type):
            print(line, flush=True)
    if args.updates_keys:
        per_s = args.updates_keys / 100 / (INTERVAL_MS / 1000)  # 1 % of the keys per checkpoint interval
        for family in args.updates_backends.split(","):
            for line in measure_updates(args.updates_keys, args.pairs, per_s, args.updates_seconds, family, args.updates_tail):
                print(line, flush=True)


if __name__ == "__main__":
    main()
