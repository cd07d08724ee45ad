"""Spark fixtures: one local SparkContext for the whole session, and running one program on both engines.

A context per module would cost several seconds each; PySpark allows only one per process anyway.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterator

import pytest

from millstream.engine.client.context import set_context
from millstream.engine.client.job_client import CloseableIterator
from millstream.engine.datastream import StreamExecutionEnvironment
from millstream.engine.datastream.execution_mode import RuntimeExecutionMode
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.graph.stream_graph import StreamGraph

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def sc() -> Iterator[Any]:
    from pyspark import SparkConf, SparkContext

    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors must import the engine
    conf = (
        SparkConf()
        .setMaster("local[2]")
        .setAppName("millstream-tests")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.driver.memory", "512m")
        .set("spark.sql.shuffle.partitions", "2")
        .set("spark.default.parallelism", "2")
    )
    context = SparkContext(conf=conf)
    context.setLogLevel("ERROR")
    try:
        yield context
    finally:
        context.stop()


class CaptureContext:
    """An execution context that only records the submitted graphs (like plan capture, in-process)."""

    def __init__(self) -> None:
        self.graphs: tuple[JobGraph, StreamGraph] | None = None
        self.collect_node: int | None = None

    def configure(self, env: StreamExecutionEnvironment) -> None:
        pass

    def submit(self, job_graph: JobGraph, stream_graph: StreamGraph) -> "CaptureContext":
        self.graphs = (job_graph, stream_graph)
        return self

    def collect(self, node_id: int, limit: int | None) -> CloseableIterator:
        self.collect_node = node_id
        return CloseableIterator(iter(()))

    def get_job_execution_result(self) -> None:
        return None


# Builds a pipeline and returns the stream to collect, or None when its sinks are the job's output.
Program = Callable[[StreamExecutionEnvironment], Any]


def batch_env(parallelism: int = 2) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment()
    env.set_parallelism(parallelism)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    return env


def capture(program: Program, parallelism: int = 2) -> tuple[JobGraph, StreamGraph]:
    """The JobGraph and StreamGraph of ``program`` as a client would submit them: with a collect sink
    on the stream it returns, or with its own sinks (``execute()``) when it returns None, since
    execute_and_collect runs only the collected stream, as in PyFlink."""
    ctx = CaptureContext()
    previous = set_context(ctx)
    try:
        env = batch_env(parallelism)
        stream = program(env)
        if stream is None:
            env.execute("test job")
        else:
            stream.execute_and_collect("test job")
    finally:
        set_context(previous)
    assert ctx.graphs is not None
    return ctx.graphs


def run_native(program: Program, parallelism: int = 2) -> list[Any]:
    """Run on the in-process MiniCluster (the default local context)."""
    with program(batch_env(parallelism)).execute_and_collect("native") as results:
        return list(results)


def run_spark(sc: Any, program: Program, parallelism: int = 2) -> list[Any]:
    from millstream.engine.client.collect_conversion import unwire_record
    from millstream.engine.spark.translator import translate

    job_graph, stream_graph = capture(program, parallelism)
    out: list[Any] = []
    # Untyped records reach the collect sink pickled (exact lists, bytearrays...); the client decodes them.
    translate(sc, job_graph, stream_graph).run(
        sc, lambda node, batch: out.extend(unwire_record(v) for v in batch), job_group=job_graph.job_id
    )
    return out
