"""Word count of a generated text file on Spark: the Millstream program translated vs hand-written PySpark.

``python benchmarks/spark_wordcount.py [LINES] [--master local[*]] [--parallelism N]``

Generates LINES lines (default 5,000,000, about 300 MB) once under
``var/bench``, then times (a) the Millstream DataStream program run through
``engine.spark.driver`` (results pushed to a private valkey, as in the
cluster) and (b) ``benchmarks/spark_baseline.py`` on the same master. Both
figures are wall-clock seconds of a fresh process, Spark's start-up included.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cloudpickle

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.client.context import set_context  # noqa: E402
from engine.client.job_client import CloseableIterator  # noqa: E402
from engine.datastream import StreamExecutionEnvironment  # noqa: E402
from engine.datastream.connectors.source import Source, SourceReader  # noqa: E402
from engine.datastream.execution_mode import RuntimeExecutionMode  # noqa: E402

VOCABULARY = [f"w{i}" for i in range(5000)]


def generate(path: Path, lines: int) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(42)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        for start in range(0, lines, 100_000):
            chunk = [" ".join(rnd.choices(VOCABULARY, k=10)) for _ in range(min(100_000, lines - start))]
            f.write("\n".join(chunk) + "\n")
    tmp.rename(path)


class _LineReader(SourceReader):
    """Reads the lines starting inside [lo, hi) of the file, as Hadoop's line splits do."""

    def __init__(self, path: str, lo: int, hi: int) -> None:
        self.f = open(path, "rb")
        self.hi = hi
        self.f.seek(lo)
        if lo > 0:
            self.f.seek(lo - 1)
            self.f.readline()  # the line that started before lo belongs to the previous split

    def poll_batch(self, max_records: int) -> list[Any] | None:
        out = []
        while len(out) < max_records and self.f.tell() < self.hi:
            line = self.f.readline()
            if not line:
                break
            out.append(line.decode().rstrip("\n"))
        return out or None

    def close(self) -> None:
        self.f.close()


class TextLineSource(Source):
    """A bounded, parallel text file source (FileSource does not exist in the engine yet)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def is_bounded(self) -> bool:
        return True

    def create_reader(self, subtask: int, parallelism: int, position: Any = None) -> SourceReader:
        size = os.path.getsize(self.path)
        return _LineReader(self.path, size * subtask // parallelism, size * (subtask + 1) // parallelism)


class _Capture:
    graphs: Any = None

    def configure(self, env: Any) -> None:
        pass

    def submit(self, job_graph: Any, stream_graph: Any) -> "_Capture":
        self.graphs = (job_graph, stream_graph)
        return self

    def collect(self, node_id: int, limit: Any) -> CloseableIterator:
        return CloseableIterator(iter(()))


def millstream_job(path: str, parallelism: int) -> tuple[Any, Any]:
    """The program a user would write, captured as (JobGraph, StreamGraph)."""
    ctx = _Capture()
    previous = set_context(ctx)
    try:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(parallelism)
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        (
            env.from_source(TextLineSource(path), None, "lines")
            .flat_map(lambda line: [(w, 1) for w in line.split()])
            .key_by(lambda t: t[0])
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .execute_and_collect("wordcount")
        )
    finally:
        set_context(previous)
    return ctx.graphs


def run_millstream(path: str, master: str, parallelism: int, redis_url: str) -> float:
    job_graph, stream_graph = millstream_job(path, parallelism)
    with tempfile.TemporaryDirectory() as d:
        graph_file, code_file = os.path.join(d, "jobgraph.json"), os.path.join(d, "usercode.bin")
        Path(graph_file).write_text(json.dumps(job_graph.to_dict()))
        Path(code_file).write_bytes(cloudpickle.dumps(stream_graph))
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "engine.spark.driver", "--job-id", job_graph.job_id, "--redis-url", redis_url,
             "--spark-master", master, "--job-graph", graph_file, "--user-code", code_file],
            cwd=ROOT, check=True,
        )
        return time.perf_counter() - started


def run_baseline(path: str, master: str, parallelism: int) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "spark_baseline.py"), path, "--master", master,
         "--partitions", str(parallelism)],
        check=True,
    )
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lines", type=int, nargs="?", default=5_000_000)
    ap.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[*]"))
    ap.add_argument("--parallelism", type=int, default=os.cpu_count() or 2)
    ns = ap.parse_args()
    path = ROOT / "var" / "bench" / f"words-{ns.lines}.txt"
    generate(path, ns.lines)
    print(f"{path}: {path.stat().st_size / 1e6:.0f} MB, {ns.lines} lines, master {ns.master}, parallelism {ns.parallelism}")

    from backend.embedded_redis import redis_url_of, start_embedded_redis

    with tempfile.TemporaryDirectory() as d:
        server = start_embedded_redis(Path(d))
        try:
            translated = run_millstream(str(path), ns.master, ns.parallelism, redis_url_of(server))
        finally:
            server.stop()
    baseline = run_baseline(str(path), ns.master, ns.parallelism)
    print(f"millstream on spark: {translated:.1f} s")
    print(f"hand-written pyspark: {baseline:.1f} s")
    print(f"ratio (millstream / pyspark): {translated / baseline:.2f}")


if __name__ == "__main__":
    main()
