"""FileSource read by Spark in splits, FileSink written through Spark's output commit protocol.

The same FileSource -> FileSink programs run on the native MiniCluster and on
Spark and must leave the same visible lines; a failed task attempt must leave
nothing visible and a failed job nothing at all.
"""
from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Callable

import pytest

from millstream.engine.common.serialization import Encoder
from millstream.engine.datastream.connectors.file_system import BucketAssigner, FileSink, FileSource, StreamFormat
from millstream.engine.datastream.functions import MapFunction
from millstream.engine.spark.files import byte_splits, read_split
from millstream.engine.spark.translator import translate
from tests.spark.conftest import batch_env, capture

WORDS = ["to", "be", "or", "not", "that", "is", "the", "question", "été", "naïve", "日本"]


def write_corpus(d: Path, files: int = 3, lines: int = 2000, seed: int = 5) -> Path:
    """Text files with \\n and \\r\\n endings, a lone \\r inside a line, empty lines, no final newline,
    plus files a FileSource must skip (hidden, ``_``-prefixed)."""
    rng = random.Random(seed)
    d.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        out = []
        for n in range(lines):
            line = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 12)))
            if n % 97 == 0:
                line += "\rcarriage"  # not a line end, natively
            out.append(line + ("\r\n" if n % 5 == 0 else "\n"))
        text = "".join(out)
        if i == 0:
            text = text.rstrip("\n") + "\r"  # the last line has no newline, but a \r
        (d / f"part-{i}.txt").write_text(text, encoding="utf-8", newline="")
    (d / ".hidden").write_text("hidden words hidden\n")
    (d / "_SUCCESS").write_text("")
    return d


def word_count_to_files(src: Path, out: Path, parallelism: int = 2) -> Callable[[Any], None]:
    def program(env):
        source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(src)).build()
        sink = (
            FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .build()
        )
        (
            env.from_source(source, None, "lines")
            .flat_map(lambda line: [(w, 1) for w in line.split()])
            .key_by(lambda t: t[0])
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .map(lambda t: f"{t[0]}\t{t[1]}")
            .sink_to(sink)
        )

    return program


def visible_lines(out: Path) -> list[str]:
    lines = []
    for dirpath, _, names in os.walk(out):
        for name in names:
            if not name.startswith("."):
                lines += native_lines(Path(dirpath) / name)
    return sorted(lines)


def hidden_files(out: Path) -> list[str]:
    return [n for _, _, names in os.walk(out) for n in names if n.startswith(".")]


def run_native_job(program, parallelism: int = 2) -> None:
    env = batch_env(parallelism)
    program(env)
    env.execute("native")


def run_spark_job(sc, program, parallelism: int = 2) -> None:
    captured: list = []

    def with_collect(env):
        program(env)
        captured.append(env)
        return None  # the sink is the job's output

    job_graph, stream_graph = capture(with_collect, parallelism)
    translate(sc, job_graph, stream_graph).run(sc, lambda node, batch: None, job_group=job_graph.job_id)


def native_lines(path: Path | str) -> list[str]:
    """A file's lines as the native reader splits them: at \\n only, a trailing \\r dropped."""
    data = Path(path).read_bytes()
    parts = data.split(b"\n")
    last = parts.pop()  # after the final \n: empty, or a last line without one
    lines = parts + ([last] if last else [])
    return [(ln[:-1] if ln.endswith(b"\r") else ln).decode() for ln in lines]


def corpus_lines(src: Path) -> list[str]:
    return [ln for f in sorted(src.iterdir()) if not f.name.startswith((".", "_")) for ln in native_lines(f)]


def expected_counts(src: Path) -> list[str]:
    counts: dict[str, int] = {}
    for line in corpus_lines(src):
        for w in line.split():
            counts[w] = counts.get(w, 0) + 1
    return sorted(f"{w}\t{n}" for w, n in counts.items())


@pytest.mark.parametrize(
    "dirname", ["plain", "with space %20 é", "odd,name[1]"], ids=["hadoop-splits", "hadoop-quoted-path", "python-splits"]
)
def test_file_word_count_native_and_spark_leave_the_same_files(sc, tmp_path, dirname):
    src = write_corpus(tmp_path / dirname)
    run_native_job(word_count_to_files(src, tmp_path / "native"))
    run_spark_job(sc, word_count_to_files(src, tmp_path / "spark"))
    native, spark = visible_lines(tmp_path / "native"), visible_lines(tmp_path / "spark")
    assert spark == native == expected_counts(src)
    assert not hidden_files(tmp_path / "spark")  # every part file was committed
    assert "hidden" not in " ".join(spark)


def test_lines_are_split_as_natively(sc, tmp_path):
    src = write_corpus(tmp_path / "in")

    def program(env):
        source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(src)).build()
        return env.from_source(source, None, "lines")

    from tests.spark.conftest import run_native, run_spark

    spark = sorted(run_spark(sc, program, parallelism=3))
    assert spark == sorted(run_native(program, parallelism=3)) == sorted(corpus_lines(src))
    assert any("\rcarriage" in line for line in spark)  # a lone \r is no line end


def test_spark_reads_one_large_file_in_parallel_splits_with_every_line_once(sc, tmp_path):
    src = tmp_path / "one"
    src.mkdir()
    rng = random.Random(11)
    lines = ["x" * rng.choice([0, 1, 5, 80, 700]) + str(i) for i in range(20_000)]
    (src / "big.txt").write_text("\n".join(lines) + "\n")

    def program(env):
        source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(src)).build()
        return env.from_source(source, None, "big").map(WithSubtask())

    job_graph, stream_graph = capture(program, parallelism=3)
    plan = translate(sc, job_graph, stream_graph)
    out: list = []
    plan.run(sc, lambda node, batch: out.extend(batch))
    assert sorted(line for line, _ in out) == sorted(lines)
    # One file, three instances each reading a share of it (natively one subtask would read it all).
    per_subtask = {i: sum(1 for _, s in out if s == i) for i in range(3)}
    assert all(n > 3000 for n in per_subtask.values()), per_subtask


class WithSubtask(MapFunction):
    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        return value, self.index


def test_latin1_files_decode_as_natively(sc, tmp_path):
    src = tmp_path / "latin1"
    src.mkdir()
    (src / "a.txt").write_bytes("café crème\r\nnaïve\n\xa0x\n".encode("latin-1"))

    def program(env):
        fmt = StreamFormat.text_line_format("ISO-8859-1")
        return env.from_source(FileSource.for_record_stream_format(fmt, str(src)).build(), None, "latin")

    from tests.spark.conftest import run_native, run_spark

    assert sorted(run_spark(sc, program)) == sorted(run_native(program)) == sorted(["café crème", "naïve", "\xa0x"])


def test_byte_splits_give_every_line_exactly_once():
    """The pure split logic: a line belongs to the split it starts in, whatever the cut points."""
    import tempfile

    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as d:
        files = []
        for i in range(4):
            path = os.path.join(d, f"f{i}")
            body = "".join("y" * rng.randrange(0, 50) + rng.choice(["\n", "\r\n"]) for _ in range(rng.randrange(0, 300)))
            with open(path, "w", newline="") as f:
                f.write(body + ("tail" if i % 2 else ""))
            files.append(path)
        expected = sorted(ln for p in files for ln in native_lines(p))
        for parallelism in (1, 2, 7, 50):
            splits = byte_splits(files, parallelism)
            got = sorted(line for s in splits for line in read_split(s[0], s[1], s[2], "utf-8"))
            assert got == expected, parallelism


class FailFirstAttempt(MapFunction):
    """Raises in the first attempt of partition 0 after 300 records have reached the sink's writer."""

    def open(self, runtime_context):
        self.first_attempt_of_0 = runtime_context.get_index_of_this_subtask() == 0 and runtime_context.get_attempt_number() == 0
        self.seen = 0

    def map(self, value):
        self.seen += 1
        if self.first_attempt_of_0 and self.seen > 300:
            raise RuntimeError("task attempt 0 fails on purpose")
        return value


def copy_lines(src: Path, out: Path, fail: MapFunction | None = None):
    def program(env):
        source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(src)).build()
        sink = (
            FileSink.for_row_format(str(out), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
            .build()
        )
        stream = env.from_source(source, None, "lines")
        (stream.map(fail) if fail is not None else stream).sink_to(sink)
        return None  # the sink is the job's output

    return program


def test_a_failed_spark_job_makes_no_output_visible(sc, tmp_path):
    """local[2] does not retry: the job fails, and even the partition that succeeded commits nothing."""
    src = write_corpus(tmp_path / "in", files=2)
    out = tmp_path / "out"
    job_graph, stream_graph = capture(copy_lines(src, out, FailFirstAttempt()))
    with pytest.raises(Exception, match="task attempt 0 fails on purpose"):
        translate(sc, job_graph, stream_graph).run(sc, lambda node, batch: None)
    assert visible_lines(out) == []
    assert hidden_files(out), "the tasks did write, into hidden in-progress files"


def test_a_retried_task_never_duplicates_output(redis_url, tmp_path):
    """A real driver process on local[2,4] (up to 4 attempts per task): attempt 0 of partition 0 writes
    300 lines, then fails; attempt 1 succeeds. Every line is visible exactly once."""
    from tests.spark.test_spark_job_master import make_master, run_until_terminal
    from millstream.engine.executiongraph.states import JobStatus
    from millstream.engine.resourcemanager.slot_pool import SlotPool

    src = write_corpus(tmp_path / "in", files=2)
    out = tmp_path / "out"
    jm, _, _ = make_master(copy_lines(src, out, FailFirstAttempt()), redis_url, spark_master="local[2,4]")
    pool = SlotPool()
    jm.try_schedule(pool)
    run_until_terminal(jm, pool, 180)
    assert jm.status is JobStatus.FINISHED, jm.eg.failure_cause
    expected = corpus_lines(src)
    assert visible_lines(out) == sorted(expected)
    assert hidden_files(out), "the failed attempt's in-progress file exists but stays hidden"
