"""Dashboard cost: server-side render time of the job page, and what open dashboards
take from a running job's throughput.

``python benchmarks/dashboard_bench.py [render|load|all] [--n N] [--clients 10]``

* ``render``: a synthetic RUNNING job of 4 vertices x parallelism 32 (128 subtasks)
  with realistic metric samples, built in memory through the engine's own
  ExecutionGraph and ``archive_vertices``; each job-page tab is rendered 200 times
  through the route's code path (``context.job_context`` then the Jinja2
  ``TemplateResponse`` of ``job.html``), and the stream's per-second update too.
  Target: p95 <= 100 ms.
* ``load``: a real cluster (valkey, JobManager, 2 TaskManagers) runs the rolling
  word count (``benchmarks/rolling_count_job.py``) once with no dashboard open and
  once with ``--clients`` SSE clients streaming the job page (the one stream a job page
  opens: its tab's, here spread over the Graph, Subtasks, Backpressure, Throughput and
  Timeline tabs), alternating which goes first, and reports the median records/s of
  each and their ratio. Target: >= 0.95. The streams are ``curl`` processes, which cost
  next to no CPU, because a browser's work happens on the user's machine, not on the
  cluster's cores.

This is a benchmark, not a test: it prints figures and asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JOB = Path(__file__).with_name("rolling_count_job.py")
VERTICES, PARALLELISM, RUNS = 4, 32, 200


# -- (a) render time ------------------------------------------------------------------


def synthetic_record(now_ms: int) -> Any:
    """A RUNNING STREAMING job: source -> map -> keyed window -> sink, 32 subtasks each,
    spread over 8 TaskManagers of 4 slots, every subtask with a full metric sample."""
    from millstream.engine.executiongraph.archived import archive_vertices
    from millstream.engine.executiongraph.execution_graph import ExecutionGraph
    from millstream.engine.executiongraph.states import ExecutionState, JobStatus
    from millstream.engine.graph.job_graph import JobEdge, JobGraph, JobVertex, OperatorDescriptor
    from millstream.engine.jobmanager.job_store import JobRecord

    names = ["Source: kafka-like datagen", "parse -> Filter -> Map", "TumblingEventTimeWindows(10s) -> reduce", "Sink: collect"]
    vertices = tuple(
        JobVertex(
            id=f"{i:032x}",
            name=name,
            parallelism=PARALLELISM,
            max_parallelism=128,
            operators=(OperatorDescriptor(i + 1, f"{i + 1:032x}", name, "MAP", None),),
            chained_edges=(),
            is_source=i == 0,
            bounded=False,
        )
        for i, name in enumerate(names)
    )
    strategies = ["FORWARD", "HASH", "REBALANCE"]
    edges = tuple(
        JobEdge(i, vertices[i].id, vertices[i + 1].id, i + 1, i + 2, strategies[i]) for i in range(VERTICES - 1)
    )
    jg = JobGraph("ab" * 16, "dashboard bench", vertices, edges, config={"pipeline.name": "bench", "parallelism.default": "32"})
    t0 = now_ms - 600_000
    eg = ExecutionGraph.from_job_graph(jg, t0)
    for s in (JobStatus.RUNNING,):
        eg.transition(s, t0 + 2000)
    rnd = random.Random(7)
    metrics: dict[tuple[str, int], dict[str, Any]] = {}
    for vi, (vid, ejv) in enumerate(eg.vertices.items()):
        for ev in ejv.subtasks:
            ex = ev.current
            for k, st in enumerate((ExecutionState.SCHEDULED, ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING)):
                ex.transition(st, t0 + 100 * (k + 1) + rnd.randint(0, 50))
            ex.taskmanager_id = f"tm-{ev.subtask % 8:02d}-{'%06x' % rnd.randrange(16**6)}"
            ex.slot = ev.subtask // 8
            busy = rnd.randint(100, 950) if vi != 2 else rnd.randint(800, 1000)
            bp = rnd.randint(0, 1000 - busy) if vi < 2 else 0
            n = 10_000_000 + rnd.randint(0, 1_000_000)
            metrics[(vid, ev.subtask)] = {
                "read-records": n if vi else 0,
                "write-records": n,
                "read-bytes": n * 24,
                "write-bytes": n * 24,
                "busyTimeMsPerSecond": busy,
                "backPressuredTimeMsPerSecond": bp,
                "idleTimeMsPerSecond": 1000 - busy - bp,
                "accumulated-idle-time": 1000,
                "accumulated-backpressured-time": 2000,
                "accumulated-busy-time": 500_000,
                "numRecordsInPerSecond": rnd.uniform(10_000, 20_000) if vi else 0.0,
                "numRecordsOutPerSecond": rnd.uniform(10_000, 20_000),
                "numLateRecordsDropped": 0,
                "currentInputWatermark": now_ms - rnd.randint(1000, 5000) if vi else None,
                "currentOutputWatermark": now_ms - rnd.randint(1000, 5000),
            }
    ts = eg.timestamps
    return JobRecord(
        jid=jg.job_id,
        name=jg.name,
        state=eg.status.value,
        job_type=jg.job_type,
        start_time=t0,
        last_modification=max(ts.values()),
        job_graph=jg.to_dict(),
        timestamps=dict(ts),
        vertices=archive_vertices(eg, metrics),
    )


class BenchDispatcher:
    """What the job page asks of the Dispatcher, answered from memory (the real one reads
    its JobMasters under a lock; that cost is not the dashboard's)."""

    def __init__(self, record: Any) -> None:
        from millstream.engine.jobmanager.dispatcher import DispatcherConfig
        from millstream.engine.resourcemanager.slot_pool import SlotPool, TaskManagerInfo

        self.record = record
        self.config = DispatcherConfig()
        self.pool = SlotPool()
        for st in record.vertices[0]["subtasks"]:
            tm = st["taskmanager_id"]
            self.pool.taskmanagers.setdefault(tm, TaskManagerInfo(tm, 4, host="10.0.0.%d" % (len(self.pool.taskmanagers) + 1)))

    def job_record(self, jid: str) -> Any:
        return self.record if jid == self.record.jid else None

    def status_message(self, jid: str) -> str | None:
        return None

    def slot_pool_snapshot(self) -> Any:
        return self.pool

    def exceptions(self, jid: str, limit: int) -> list[Any]:
        return []

    def spark_progress(self, jid: str) -> dict[str, Any] | None:
        return None


def _percentile(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def bench_render(runs: int = RUNS) -> dict[str, tuple[float, float]]:
    from starlette.requests import Request

    from millstream.backend.ui import context
    from millstream.backend.ui.templating import block, templates
    from millstream.backend.ui.throughput import ThroughputHistory

    now = int(time.time() * 1000)
    record = synthetic_record(now)
    dispatcher = BenchDispatcher(record)
    history = ThroughputHistory()
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b"", "server": ("bench", 80), "scheme": "http", "root_path": ""}
    cases = [("graph", "job"), ("graph", "execution"), ("subtasks", "job"), ("backpressure", "job"),
             ("watermarks", "job"), ("timeline", "job"), ("throughput", "job"), ("configuration", "job")]
    out: dict[str, tuple[float, float]] = {}
    for tab, view in cases:

        def page() -> int:  # the route's code path (backend/ui/routes/job.py job_tab)
            request = Request(scope)
            ctx = {"page": "jobs", **context.job_context(dispatcher, history, record.jid, tab, view)}
            return len(templates.TemplateResponse(request, "job.html", ctx).body)

        def update() -> int:  # one SSE tick of the same tab (job_stream's produce)
            ctx = {"request": Request(scope), "page": "jobs", **context.job_context(dispatcher, history, record.jid, tab, view)}
            n = len(block("job.html", "header", **ctx))
            if ctx["live_body"]:
                n += len(block("job.html", "body", **ctx))
            return n

        for name, fn in ((f"{tab}{'/' + view if view != 'job' else ''} page", page), (f"{tab}{'/' + view if view != 'job' else ''} stream tick", update)):
            for _ in range(5):  # warm the template cache
                fn()
            samples = []
            size = 0
            for _ in range(runs):
                t = time.perf_counter()
                size = fn()
                samples.append((time.perf_counter() - t) * 1000)
            p50, p95 = statistics.median(samples), _percentile(samples, 0.95)
            out[name] = (p50, p95)
            print(f"  {name:32s} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms  ({size // 1024} KiB)", flush=True)
    return out


# -- (b) throughput under open dashboards ----------------------------------------------


class SseClients:
    """``n`` browsers' worth of job-page streams, each holding the job's tab stream open and
    counting the events it receives.

    A browser renders on the user's machine, not on the cluster, but here the clients share
    the job's two cores; so each stream is a ``curl`` process (a few ms of CPU for a whole
    run) rather than a Python client, whose parsing took 11-12% of a core for ten streams and
    charged that to the dashboards. Without curl, Python clients are used."""

    def __init__(self, base_url: str, paths: list[str], n: int) -> None:
        self.base_url, self.paths, self.n = base_url, paths, n
        self.stop = threading.Event()
        self.events = 0
        self.errors = 0
        self.lock = threading.Lock()
        self.curl = shutil.which("curl")
        self.outputs: list[Any] = []
        self.procs: list[subprocess.Popen] = []
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(n)]

    def _run(self, i: int) -> None:
        import httpx

        path = self.paths[i % len(self.paths)]
        with httpx.Client(base_url=self.base_url, timeout=httpx.Timeout(10, read=30)) as http:
            while not self.stop.is_set():
                try:
                    with http.stream("GET", path, headers={"Accept": "text/event-stream"}) as r:
                        for line in r.iter_lines():
                            if line.startswith("event:"):
                                with self.lock:
                                    self.events += 1
                            if self.stop.is_set():
                                break
                except Exception:  # noqa: BLE001 - count and reconnect, as a browser would
                    with self.lock:
                        self.errors += 1
                    time.sleep(1)

    def cpu_s(self) -> float:
        """CPU the curl clients used (the Python clients are counted with this process)."""
        import psutil

        total = 0.0
        for p in self.procs:
            try:
                t = psutil.Process(p.pid).cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    def __enter__(self) -> "SseClients":
        if self.curl is None:
            for t in self.threads:
                t.start()
            return self
        for i in range(self.n):
            out = tempfile.TemporaryFile()
            self.outputs.append(out)
            url = self.base_url + self.paths[i % len(self.paths)]
            self.procs.append(subprocess.Popen(
                [self.curl, "-sN", "-H", "Accept: text/event-stream", url], stdout=out, stderr=subprocess.DEVNULL
            ))
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        if self.curl is None:
            for t in self.threads:
                t.join(35)
            return
        self.client_cpu_s = self.cpu_s()
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
            p.wait(10)
            if p.returncode not in (0, -15, 18):  # ended by the stream's close, by us, or cut mid-transfer
                self.errors += 1
        for out in self.outputs:
            out.seek(0)
            self.events += sum(1 for line in out if line.startswith(b"event:"))
            out.close()


def _rate(stdout: str) -> float | None:
    m = re.search(r"records_per_s=(\d+)", stdout)
    return float(m.group(1)) if m else None


def _cpu_s(pid: int | None = None) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def _run_job(cluster: Any, n: int, p: int, clients: int) -> tuple[float | None, int, int, float, float]:
    """Runs the rolling count; with ``clients`` > 0 that many SSE clients stream the job
    page from the moment the job is submitted until it ends. Returns records/s, SSE events,
    stream errors, and the CPU share of one core the JobManager and this process (the
    clients) used meanwhile: on a shared, noisy machine the CPU the dashboards take is
    steadier evidence than a throughput ratio."""
    import httpx

    jm_cpu0, me_cpu0, t0 = _cpu_s(cluster.jobmanager.pid), _cpu_s(), time.monotonic()

    known = {j["jid"] for j in cluster.http.get("/jobs/overview").json()["jobs"]}
    proc = subprocess.Popen(
        [sys.executable, "-m", "millstream.backend.cli", "run", str(JOB), str(n), str(p)],
        env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    events = errors = 0
    if clients:
        jid = None
        deadline = time.time() + 60
        while jid is None and time.time() < deadline:
            try:
                jid = next((j["jid"] for j in cluster.http.get("/jobs/overview").json()["jobs"] if j["jid"] not in known), None)
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        # the job page's default tab (graph) and the ones a reader watches while a job runs
        paths = [f"/ui/jobs/{jid}/{tab}/stream?view=job" for tab in ("graph", "subtasks", "backpressure", "throughput", "timeline")]
        with SseClients(cluster.url, paths, clients) as sse:
            out, err = proc.communicate(timeout=900)
        events, errors = sse.events, sse.errors
        me_cpu0 -= getattr(sse, "client_cpu_s", 0.0)  # curl's CPU counts as the clients' too
    else:
        out, err = proc.communicate(timeout=900)
    wall = time.monotonic() - t0
    jm_share, me_share = (_cpu_s(cluster.jobmanager.pid) - jm_cpu0) / wall, (_cpu_s() - me_cpu0) / wall
    if proc.returncode != 0:
        print(err[-2000:], file=sys.stderr)
    return _rate(out), events, errors, jm_share, me_share


def bench_load(n: int, p: int, clients: int, rounds: int) -> None:
    from tests.integration.cluster import Cluster

    with tempfile.TemporaryDirectory(prefix="millstream-dashbench-") as tmp:
        cluster = Cluster(Path(tmp)).start(taskmanagers=2, slots=2)
        try:
            print(f"  rolling count N={n} P={p} on 2 TaskManagers x 2 slots; {clients} SSE clients; {rounds} round(s), alternating", flush=True)
            _run_job(cluster, max(n // 20, 10_000), p, 0)  # warm-up: imports, workers
            base, loaded, ratios, jm = [], [], [], {0: [], clients: []}
            for r in range(rounds):
                pair = {}
                for c in ((0, clients) if r % 2 == 0 else (clients, 0)):
                    rate, events, errors, jm_share, me_share = _run_job(cluster, n, p, c)
                    (loaded if c else base).append(rate or 0.0)
                    pair[c] = rate or 0.0
                    jm[c].append(jm_share)
                    extra = f", {events} SSE events, {errors} stream errors, clients' CPU {me_share:.1%} of a core" if c else ""
                    print(f"  round {r + 1}: {c:2d} dashboards: {rate or 0:,.0f} records/s, JobManager CPU {jm_share:.1%} of a core{extra}", flush=True)
                ratios.append(pair[clients] / pair[0] if pair[0] else 0.0)
            b, l = statistics.median(base), statistics.median(loaded)
            print(f"  median without dashboards {b:,.0f} records/s; with {clients}: {l:,.0f} records/s; ratio of medians {l / b:.3f}")
            print(f"  per-round ratios {', '.join(f'{x:.2f}' for x in ratios)}; median {statistics.median(ratios):.3f} (target >= 0.95)")
            extra_cpu = statistics.median(jm[clients]) - statistics.median(jm[0])
            print(f"  JobManager CPU: {statistics.median(jm[0]):.1%} of a core without dashboards, {statistics.median(jm[clients]):.1%} with {clients}"
                  f" (+{extra_cpu:.1%} of one core = {extra_cpu / (os.cpu_count() or 1):.1%} of this machine)")
        finally:
            cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", nargs="?", default="all", choices=("render", "load", "all"))
    ap.add_argument("--n", type=int, default=8_000_000, help="records of the rolling count (runs of several seconds)")
    ap.add_argument("-p", type=int, default=2, help="its parallelism")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=4, help="pairs of runs, alternating which goes first")
    ap.add_argument("--runs", type=int, default=RUNS)
    ns = ap.parse_args()
    print(f"machine: {machine()}")
    if ns.what in ("render", "all"):
        print(f"(a) job page server-side render, {VERTICES} vertices x parallelism {PARALLELISM}, {ns.runs} runs each:")
        bench_render(ns.runs)
    if ns.what in ("load", "all"):
        print("(b) job throughput with and without open dashboards:")
        bench_load(ns.n, ns.p, ns.clients, ns.rounds)


if __name__ == "__main__":
    main()
