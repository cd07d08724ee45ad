"""Batch word count of a generated text file: Millstream on Spark, hand-written PySpark, Millstream native.

``python benchmarks/spark_wordcount.py [LINES] [--master local[*]] [--parallelism N] [--skip-native]``

Generates LINES lines (default 5,000,000, about 300 MB) once under
``var/bench``, then times, in the same run:
(a) the Millstream DataStream program (FileSource, flat_map, key_by, reduce,
    execute_and_collect) run through ``millstream.engine.spark.driver``, the process a
    JobManager starts per Spark job (results pushed to a private valkey, as in
    the cluster);
(b) ``benchmarks/spark_baseline.py``, the same count hand-written in PySpark,
    on the same master;
(c) the same program with ``millstream run --engine native`` on a local
    cluster (JobManager + one TaskManager with one slot per core), the
    streaming runtime in BATCH mode.
Each figure is the wall-clock seconds of a fresh process, start-up included
(the cluster of (c) is started before its clock), and its CPU seconds over
all its processes, which a busy shared machine disturbs less. ``--rounds N``
times (a) and (b) N times in alternating order and keeps the best of each.
Every run's word total is checked. ``--job PATH P`` is the program itself, as ``millstream run`` runs it.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from millstream.engine.client.context import set_context  # noqa: E402
from millstream.engine.client.job_client import CloseableIterator  # noqa: E402
from millstream.engine.datastream import StreamExecutionEnvironment  # noqa: E402
from millstream.engine.datastream.connectors.file_system import FileSource, StreamFormat  # noqa: E402
from millstream.engine.datastream.execution_mode import RuntimeExecutionMode  # noqa: E402
from millstream.engine.runtime.collect import RECORDS, CollectEntry  # noqa: E402

VOCABULARY = [f"w{i}" for i in range(5000)]
WORDS_PER_LINE = 10


def generate(path: Path, lines: int) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(42)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        for start in range(0, lines, 100_000):
            chunk = [" ".join(rnd.choices(VOCABULARY, k=WORDS_PER_LINE)) for _ in range(min(100_000, lines - start))]
            f.write("\n".join(chunk) + "\n")
    tmp.rename(path)


class _Capture:
    graphs: Any = None

    def configure(self, env: Any) -> None:
        pass

    def submit(self, job_graph: Any, stream_graph: Any) -> "_Capture":
        self.graphs = (job_graph, stream_graph)
        return self

    def collect(self, node_id: int, limit: Any) -> CloseableIterator:
        return CloseableIterator(iter(()))


def word_count(path: str, parallelism: int) -> list[tuple[str, int]]:
    """The program a user would write: the same code runs on Spark and on the native runtime."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), path).build()
    with (
        env.from_source(source, None, "lines")
        .flat_map(lambda line: [(w, 1) for w in line.split()])
        .key_by(lambda t: t[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .execute_and_collect("wordcount")
    ) as results:
        return list(results)


def millstream_job(path: str, parallelism: int) -> tuple[Any, Any]:
    """The program captured as (JobGraph, StreamGraph), as ``millstream run`` submits it."""
    ctx = _Capture()
    previous = set_context(ctx)
    try:
        word_count(path, parallelism)
    finally:
        set_context(previous)
    return ctx.graphs


class TreeCpu:
    """CPU seconds (user + system) spent by this process's descendants while the block runs.

    The machine is shared, so wall time swings with other people's load; CPU time
    much less. Processes are sampled every 0.2 s (a JVM and Spark's Python workers
    are not reaped by us, so rusage cannot see them); what a process had already
    spent when the block started is not counted.
    """

    def __init__(self) -> None:
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.done = threading.Event()

    def _sample(self, initial: bool = False) -> None:
        for p in psutil.Process().children(recursive=True):
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            spent = t.user + t.system
            if initial:
                self.first[p.pid] = spent
            self.last[p.pid] = spent

    def _run(self) -> None:
        while not self.done.wait(0.2):
            self._sample()

    def __enter__(self) -> "TreeCpu":
        self._sample(initial=True)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._sample()
        self.done.set()
        self.thread.join()

    @property
    def seconds(self) -> float:
        return sum(v - self.first.get(pid, 0.0) for pid, v in self.last.items())


@dataclass(frozen=True)
class Figure:
    seconds: float  # wall clock
    cpu_seconds: float  # every process of the run, user + system
    words: int  # the total the run counted, checked against the input

    def __str__(self) -> str:
        return f"{self.seconds:.1f} s wall, {self.cpu_seconds:.1f} s CPU"


def best(runs: list[Figure]) -> Figure:
    """The fastest run (the least disturbed on a shared machine); every run's total must be right anyway."""
    for r in runs:
        if r.words != runs[0].words:
            raise SystemExit(f"runs of the same job counted different totals: {[x.words for x in runs]}")
    return Figure(min(r.seconds for r in runs), min(r.cpu_seconds for r in runs), runs[0].words)


def run_millstream(path: str, master: str, parallelism: int, redis_url: str) -> Figure:
    """Seconds of the Spark driver process a JobManager would start, and the words it counted."""
    import redis

    from millstream.engine import redis_keys
    from millstream.engine.runtime.io.serialization import MsgpackSerializer

    job_graph, stream_graph = millstream_job(path, parallelism)
    with tempfile.TemporaryDirectory() as d:
        graph_file, code_file = os.path.join(d, "jobgraph.json"), os.path.join(d, "usercode.bin")
        Path(graph_file).write_text(json.dumps(job_graph.to_dict()))
        Path(code_file).write_bytes(cloudpickle.dumps(stream_graph))
        started = time.perf_counter()
        with TreeCpu() as cpu:
            subprocess.run(
                [sys.executable, "-m", "millstream.engine.spark.driver", "--job-id", job_graph.job_id, "--redis-url", redis_url,
                 "--spark-master", master, "--job-graph", graph_file, "--user-code", code_file],
                cwd=ROOT, check=True,
            )
        seconds = time.perf_counter() - started
    client, ser = redis.Redis.from_url(redis_url), MsgpackSerializer()
    entries = [CollectEntry.decode(raw, ser) for raw in client.lrange(redis_keys.collect(job_graph.job_id), 0, -1)]
    return Figure(seconds, cpu.seconds, sum(n for e in entries if e.kind == RECORDS for _, n in e.values))


def run_baseline(path: str, master: str, parallelism: int) -> Figure:
    started = time.perf_counter()
    with TreeCpu() as cpu:
        out = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "spark_baseline.py"), path, "--master", master,
             "--partitions", str(parallelism)],
            check=True, capture_output=True, text=True,
        ).stdout
    seconds = time.perf_counter() - started
    return Figure(seconds, cpu.seconds, int(re.search(r"total words: (\d+)", out).group(1)))


def run_native(path: str, parallelism: int) -> Figure:
    """``millstream run --engine native``: the same program on the streaming runtime in BATCH mode, on a
    local cluster (a JobManager and one TaskManager with a slot per core, started before the clock)."""
    from millstream.backend.cluster_launcher import LocalCluster
    from millstream.backend.settings import Settings

    with tempfile.TemporaryDirectory(prefix="millstream-bench-") as tmp:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        settings = Settings(port=port, data_dir=Path(tmp), redis_url=None, database_url=None)
        cluster = LocalCluster(settings, taskmanagers=1, slots=parallelism, restart_taskmanagers=False)
        try:
            cluster.start()
            if not cluster.wait_ready():
                raise RuntimeError(f"the cluster did not start; see {tmp}/log")
            env = dict(cluster.env, MILLSTREAM_JOBMANAGER=f"http://127.0.0.1:{port}")
            started = time.perf_counter()
            with TreeCpu() as cpu:  # the client, and the JobManager, TaskManager and valkey it keeps busy
                out = subprocess.run(
                    [sys.executable, "-m", "millstream.backend.cli", "run", "--engine", "native", __file__, "--job", path,
                     str(parallelism)],
                    env=env, cwd=ROOT, check=True, capture_output=True, text=True,
                ).stdout
            seconds = time.perf_counter() - started
        finally:
            cluster.shutdown()
    return Figure(seconds, cpu.seconds, int(re.search(r"total words: (\d+)", out).group(1)))


def job_main(path: str, parallelism: int) -> None:
    """``--job``: what ``millstream run`` executes."""
    counts = word_count(path, parallelism)
    print(f"distinct words: {len(counts)}; total words: {sum(n for _, n in counts)}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--job":
        job_main(sys.argv[2], int(sys.argv[3]))
        return
    from machine import machine

    ap = argparse.ArgumentParser()
    ap.add_argument("lines", type=int, nargs="?", default=5_000_000)
    ap.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[*]"))
    ap.add_argument("--parallelism", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--skip-native", action="store_true", help="only the two Spark figures")
    ap.add_argument(
        "--rounds", type=int, default=1, help="time both Spark runs this often, alternating their order; the best counts"
    )
    ns = ap.parse_args()
    path = ROOT / "var" / "bench" / f"words-{ns.lines}.txt"
    generate(path, ns.lines)
    print(f"machine: {machine()}")
    print(f"{path}: {path.stat().st_size / 1e6:.0f} MB, {ns.lines} lines, master {ns.master}, parallelism {ns.parallelism}")

    from millstream.backend.embedded_redis import redis_url_of, start_embedded_redis

    translated_runs: list[Figure] = []
    baseline_runs: list[Figure] = []
    with tempfile.TemporaryDirectory() as d:
        server = start_embedded_redis(Path(d))
        try:
            for i in range(ns.rounds):
                # A B, then B A: whichever runs first does not always meet the same background load.
                order = ("spark", "baseline") if i % 2 == 0 else ("baseline", "spark")
                for which in order:
                    if which == "spark":
                        translated_runs.append(run_millstream(str(path), ns.master, ns.parallelism, redis_url_of(server)))
                    else:
                        baseline_runs.append(run_baseline(str(path), ns.master, ns.parallelism))
        finally:
            server.stop()
    translated, baseline = best(translated_runs), best(baseline_runs)
    if ns.rounds > 1:
        for what, runs in (("millstream on spark", translated_runs), ("hand-written pyspark", baseline_runs)):
            print(f"{what}, every run: " + "; ".join(str(r) for r in runs))
    figures = {"millstream on spark": translated, "hand-written pyspark": baseline}
    if not ns.skip_native:
        figures["millstream native runtime, BATCH mode (millstream run --engine native)"] = run_native(
            str(path), ns.parallelism
        )
    expected = ns.lines * WORDS_PER_LINE
    for what, figure in figures.items():
        if figure.words != expected:
            raise SystemExit(f"{what} counted {figure.words} words, not {expected}")
        print(f"{what}: {figure}")
    print(
        f"ratio millstream on spark / pyspark: {translated.seconds / baseline.seconds:.2f} wall, "
        f"{translated.cpu_seconds / baseline.cpu_seconds:.2f} CPU"
    )
    if not ns.skip_native:
        native = figures["millstream native runtime, BATCH mode (millstream run --engine native)"]
        print(
            f"ratio native / millstream on spark: {native.seconds / translated.seconds:.2f} wall, "
            f"{native.cpu_seconds / translated.cpu_seconds:.2f} CPU"
        )


if __name__ == "__main__":
    main()
