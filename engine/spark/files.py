"""FileSource and two-phase-commit sinks (FileSink) on Spark.

A bounded ``FileSource`` is read by Spark in parallel splits: its files (found
as the native source finds them, hidden and ``_`` files left out) go to
``sc.textFile``, whose Hadoop input format cuts them at block boundaries, a
line belonging to the split it starts in. Lines end at ``\\n`` only, with a
trailing ``\\r`` dropped, exactly as the native reader splits them. Files in
another charset than UTF-8 (textFile decodes UTF-8 in the JVM), and paths
Hadoop would read as lists or globs, are cut into the same byte splits and
read by the Python workers. One difference remains: bytes that are not valid
UTF-8 become U+FFFD through textFile, where the native reader fails.

A ``sink_to`` sink with a ``Committer`` (FileSink) is written with Spark's
output commit protocol: each task runs the sink's writer and ends with its
``prepare_commit()``, the task's commit message (for FileSink, the hidden part
files and their lengths); the driver commits them only after the whole Spark
job has succeeded (``Committer.commit``, idempotent). A failed or speculative
task attempt's files are never in the messages the driver receives, so they
stay hidden: a task retry never duplicates output, and a failed job makes
nothing visible. Only those small messages reach the driver, never records.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from millstream.engine.checkpoint.filesystem import is_remote
from millstream.engine.datastream.connectors.file_paths import file_size, open_binary
from millstream.engine.datastream.connectors.sink import InitContext, Sink

RDD = Any  # pyspark.RDD; not imported so this module loads without a JVM

#: characters Hadoop's path list and glob syntax would interpret; such paths are read in Python
_HADOOP_SPECIAL = re.compile(r"[,{}\[\]*?\\:]")
_SPLIT_BYTES = 32 * 1024 * 1024  # as Hadoop's local block size: the largest split a file is cut into


def read_text_files(sc: Any, files: list[str], charset: str, parallelism: int) -> RDD:
    """The lines of ``files`` over ``parallelism`` partitions, in splits read by Spark."""
    if not files:
        return sc.parallelize([], parallelism)
    utf8 = charset.replace("-", "").replace("_", "").upper() == "UTF8"
    if not utf8 or any(_HADOOP_SPECIAL.search(f) or is_remote(f) for f in files):
        # textFile decodes as UTF-8 in the JVM; other charsets, paths Hadoop would take for lists
        # or globs, and URLs (read through fsspec, not Hadoop's connectors) are cut into the same
        # byte splits here and read in the Python workers.
        rdd = _python_splits(sc, files, charset, parallelism)
    else:
        rdd = _hadoop_splits(sc, files, parallelism)
    n = rdd.getNumPartitions()
    # One partition per parallel instance, as everywhere in the translation (the runtime context's
    # subtask index is the partition index): several splits per instance, or idle instances.
    if n > parallelism:
        return rdd.coalesce(parallelism)
    if n < parallelism:
        return sc.union([rdd, sc.parallelize([], parallelism - n)])
    return rdd


def _hadoop_splits(sc: Any, files: list[str], parallelism: int) -> RDD:
    # Hadoop's default also ends lines at a lone \r; the native reader (and Flink's) only at \n.
    # The setting is the driver's (one job per driver process), read by every textFile after it.
    conf = sc._jsc.hadoopConfiguration()
    conf.set("textinputformat.record.delimiter", "\n")
    rdd = sc.textFile(",".join("file://" + f for f in files), minPartitions=parallelism)
    return rdd.mapPartitions(_strip_cr, preservesPartitioning=True)


def _strip_cr(lines: Iterable[str]) -> Iterator[str]:
    for line in lines:
        yield line[:-1] if line.endswith("\r") else line


def byte_splits(files: list[str], parallelism: int) -> list[tuple[str, int, int]]:
    """(path, start, end) byte ranges: each file cut into pieces of at most the split size, which is
    the total over ``parallelism`` (Hadoop's goal size) capped at ``_SPLIT_BYTES``."""
    sizes = [(f, file_size(f)) for f in files]
    goal = max(1, min(_SPLIT_BYTES, -(-sum(s for _, s in sizes) // parallelism)))
    out = []
    for f, size in sizes:
        if size == 0:
            continue
        out.extend((f, lo, min(lo + goal, size)) for lo in range(0, size, goal))
    return out


def read_split(path: str, lo: int, hi: int, charset: str) -> Iterator[str]:
    """The lines that start inside [lo, hi): a line crossing ``hi`` is this split's, one crossing ``lo`` is not."""
    with open_binary(path) as f:
        if lo > 0:
            f.seek(lo - 1)
            f.readline()  # the rest of the line that started before lo (or just its \n)
        pos = f.tell()
        while pos < hi:
            line = f.readline()
            if not line:
                return
            pos += len(line)
            if line.endswith(b"\n"):
                line = line[:-1]
            if line.endswith(b"\r"):  # also on a last line without \n, as the native reader does
                line = line[:-1]
            yield line.decode(charset)


def _python_splits(sc: Any, files: list[str], charset: str, parallelism: int) -> RDD:
    splits = byte_splits(files, parallelism)
    return sc.parallelize(splits, parallelism).flatMap(lambda s: read_split(s[0], s[1], s[2], charset))


# -- sinks ---------------------------------------------------------------------------
@dataclass(frozen=True)
class WriterContext:
    """What the native runtime tells a sink's writer (``InitContext``), less the subtask and attempt."""

    parallelism: int
    job_id: str
    operator_id: str  # the sink's stream node id, as natively


def _task_attempt() -> int:
    from pyspark import TaskContext

    tc = TaskContext.get()
    return tc.attemptNumber() if tc is not None else 0


def two_phase_writer_partition(sink: Sink, context: WriterContext) -> Callable[[int, Iterable[Any]], Iterator[Any]]:
    """One task of a ``sink_to`` sink: write the partition, then yield its committables (the task's commit message)."""

    def run(index: int, it: Iterable[Any]) -> Iterator[Any]:
        init = InitContext(index, context.parallelism, _task_attempt(), context.job_id, context.operator_id)
        writer = sink.restore_writer(init, [])
        try:
            write = writer.write
            for v in it:
                write(v)
            writer.flush(True)
            committables = writer.prepare_commit()
        finally:
            writer.close()
        yield from committables

    return run


def write_and_commit(rdd: RDD, sink: Sink, context: WriterContext, sink_name: str) -> None:
    """Run the Spark job that writes ``rdd`` through ``sink``, then commit the successful tasks' messages."""
    committables = rdd.mapPartitionsWithIndex(two_phase_writer_partition(sink, context)).collect()
    committer = sink.create_committer()
    if committer is None:
        if committables:
            raise TypeError(f"sink '{sink_name}' staged committables but has no Committer")
        return
    try:
        if committables:
            committer.commit(committables)
    finally:
        committer.close()
