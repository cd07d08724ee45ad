"""FileSource: file enumeration and filtering, split assignment, and resuming readers by byte offset."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from millstream.engine.common.time import Duration
from millstream.engine.datastream.connectors.file_source import DONE, assign_splits, enumerate_files, owner_of
from millstream.engine.datastream.connectors.file_system import FileSource, StreamFormat


def _drain(reader, batch=3):
    out = []
    while (b := reader.poll_batch(batch)) is not None:
        out.extend(b)
    return out


def _source(*paths, charset="UTF-8"):
    return FileSource.for_record_stream_format(StreamFormat.text_line_format(charset=charset), *map(str, paths)).build()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("a1\na2\na3\n")
    (tmp_path / "b.txt").write_text("b1\r\nb2")  # CRLF, and a last line without a newline
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.txt").write_text("c1\n\nc3\n")  # an empty line is a record
    (tmp_path / ".hidden").write_text("no\n")
    (tmp_path / "_SUCCESS").write_text("no\n")
    (tmp_path / ".part-x.inprogress").write_text("no\n")
    (tmp_path / "_tmp").mkdir()
    (tmp_path / "_tmp" / "d.txt").write_text("no\n")
    return tmp_path


def test_directories_are_read_recursively_without_hidden_or_underscore_files(tree: Path) -> None:
    assert enumerate_files([str(tree)]) == [str(tree / "a.txt"), str(tree / "b.txt"), str(tree / "sub" / "c.txt")]
    lines = _drain(_source(tree).create_reader(0, 1))
    assert lines == ["a1", "a2", "a3", "b1", "b2", "c1", "", "c3"]


def test_public_attributes_the_spark_runner_reads(tree: Path) -> None:
    src = FileSource.for_record_stream_format(StreamFormat.text_line_format("latin-1"), str(tree / "a.txt"), f"file://{tree}/sub").build()
    assert src.paths == (str(tree / "a.txt"), str(tree / "sub"))
    assert src.stream_format.charset == "latin-1"
    assert src.is_bounded()


@pytest.mark.parametrize("parallelism", [1, 2, 3, 4])
def test_every_line_is_read_by_exactly_one_subtask(tree: Path, parallelism: int) -> None:
    src = _source(tree)
    lines = [ln for i in range(parallelism) for ln in _drain(src.create_reader(i, parallelism))]
    assert sorted(lines) == sorted(["a1", "a2", "a3", "b1", "b2", "c1", "", "c3"])


def test_fresh_splits_are_sorted_files_round_robin() -> None:
    files = ["/d/a", "/d/b", "/d/c", "/d/d", "/d/e"]
    assert assign_splits(files, 0, 2, continuous=False) == [["/d/a", 0], ["/d/c", 0], ["/d/e", 0]]
    assert assign_splits(files, 1, 2, continuous=False) == [["/d/b", 0], ["/d/d", 0]]
    # Monitoring assigns by a hash of the path, so files found later go to the same subtask everywhere.
    for f in files:
        owners = [i for i in range(3) if ["%s" % f, 0] in assign_splits(files, i, 3, continuous=True)]
        assert owners == [owner_of(f, 3)]


def test_resuming_from_any_snapshot_reads_each_line_exactly_once(tmp_path: Path) -> None:
    expected = []
    for name in ("x.txt", "y.txt"):
        lines = [f"{name}-{i}-é" for i in range(50)]
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        expected += lines
    src = _source(tmp_path)
    for cut in range(0, 101, 7):
        reader = src.create_reader(0, 1)
        got = []
        while len(got) < cut:
            got.extend(reader.poll_batch(min(3, cut - len(got))))
        position = reader.snapshot()
        reader.close()
        # The position is plain data: a list of [path, offset] split states.
        assert all(isinstance(p, str) and isinstance(o, int) for p, o in position)
        got += _drain(src.create_reader(0, 1, position))
        assert got == expected, cut


def test_finished_splits_are_kept_as_done(tree: Path) -> None:
    reader = _source(tree / "a.txt").create_reader(0, 1)
    assert _drain(reader) == ["a1", "a2", "a3"]
    assert reader.snapshot() == [[str(tree / "a.txt"), DONE]]
    assert _drain(_source(tree / "a.txt").create_reader(0, 1, reader.snapshot())) == []


def test_splits_of_other_subtasks_can_be_resumed_after_rescale(tree: Path) -> None:
    src = _source(tree)
    r0, r1 = src.create_reader(0, 2), src.create_reader(1, 2)
    first = r0.poll_batch(2) + r1.poll_batch(1)
    merged = r0.snapshot() + r1.snapshot()
    rest = _drain(src.create_reader(0, 1, merged))
    assert sorted(first + rest) == sorted(["a1", "a2", "a3", "b1", "b2", "c1", "", "c3"])


def test_monitoring_picks_up_new_files(tmp_path: Path) -> None:
    (tmp_path / "1.txt").write_text("one\n")
    src = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path)).monitor_continuously(
        Duration.of_millis(10)
    ).build()
    assert not src.is_bounded()
    reader = src.create_reader(0, 1)
    got = reader.poll_batch(10)
    assert got == ["one"]
    assert reader.poll_batch(10) == []  # nothing new: unbounded sources never end
    (tmp_path / ".2.txt").write_text("two\n")
    os.replace(tmp_path / ".2.txt", tmp_path / "2.txt")  # appear atomically, as Flink expects
    deadline = time.monotonic() + 5
    while not (b := reader.poll_batch(10)) and time.monotonic() < deadline:
        pass
    assert b == ["two"]
    # A restored reader remembers which files it read.
    resumed = src.create_reader(0, 1, reader.snapshot())
    assert resumed.poll_batch(10) == []


def test_bad_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing"):
        _source(tmp_path / "missing")
    with pytest.raises(ValueError, match="unknown charset 'nope'"):
        StreamFormat.text_line_format("nope")
    with pytest.raises(ValueError, match="at least one path"):
        FileSource.for_record_stream_format(StreamFormat.text_line_format())
    with pytest.raises(ValueError, match="positive Duration"):
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(tmp_path)).monitor_continuously(5)
    with pytest.raises(ValueError, match=r"list of \[path, offset\]"):
        _source(tmp_path).create_reader(0, 1, 17)
    # A URL is read through fsspec (test_file_sink_url.py); one whose scheme nothing serves is refused.
    with pytest.raises(ValueError, match="no file system is known for nosuchscheme://"):
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), "nosuchscheme://nn/x")


@pytest.mark.parametrize("stages", [(2, 3, 1), (3, 1, 2), (1, 4, 2)])
def test_rescaled_resumes_read_every_line_exactly_once(tmp_path: Path, stages) -> None:
    """Stop part way at one parallelism, resume at another from the redistributed split lists."""
    from millstream.engine.checkpoint.rescale import redistribute_splits

    expected = []
    for f in range(5):
        lines = [f"{f}-{i}" for i in range(40)]
        (tmp_path / f"{f}.txt").write_text("\n".join(lines) + "\n")
        expected += lines
    src = _source(tmp_path)
    seen: list[str] = []
    positions: dict[int, list] | None = None
    for stage, parallelism in enumerate(stages):
        old, positions = positions, {}
        for i in range(parallelism):
            splits = None if old is None else redistribute_splits(old, i, parallelism, len(old))
            reader = src.create_reader(i, parallelism, splits)
            if stage < len(stages) - 1:
                for _ in range(4):  # part way: a few batches, leaving files half read
                    seen.extend(reader.poll_batch(9) or [])
            else:
                seen.extend(_drain(reader))
            positions[i] = reader.snapshot()
    assert sorted(seen) == sorted(expected)


def _monitoring(path: Path):
    return FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(path)).monitor_continuously(
        Duration.of_millis(1)
    ).build()


def _write(path: Path, name: str, n: int) -> list[str]:
    lines = [f"{name}-{i}" for i in range(n)]
    (path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return lines


@pytest.mark.parametrize("stages", [(2, 3, 1), (3, 1, 2), (1, 4, 2)])
def test_a_monitoring_source_rescales_and_reads_every_line_once_as_files_keep_coming(tmp_path: Path, stages) -> None:
    """Files finished, half read and not yet seen at each stop; at the new parallelism every split
    goes to the subtask that owns its path, which is also the one that would discover it again."""
    expected = [line for f in range(4) for line in _write(tmp_path, f"start{f}", 30)]
    src = _monitoring(tmp_path)
    seen: list[str] = []
    positions: dict[int, list] | None = None
    for stage, parallelism in enumerate(stages):
        old, positions = positions, {}
        readers = [
            src.create_reader(i, parallelism, None if old is None else src.redistribute_splits(old, i, parallelism, len(old)))
            for i in range(parallelism)
        ]
        for f in range(3):  # new files while this stage runs
            expected += _write(tmp_path, f"stage{stage}-{f}", 25)
        last = stage == len(stages) - 1
        quiet = 0
        while quiet < 3 if last else quiet < 1:
            got = [line for r in readers for line in r.poll_batch(7)]
            seen.extend(got)
            quiet = quiet + 1 if not got or not last else 0
        positions = {i: r.snapshot() for i, r in enumerate(readers)}
        for r in readers:
            r.close()
    assert sorted(seen) == sorted(expected)
    assert len(seen) == len(set(seen)), "a line was read twice"


def test_a_monitoring_source_refuses_splits_not_redistributed_by_path(tmp_path: Path) -> None:
    for i in range(4):
        (tmp_path / f"{i}.txt").write_text(f"{i}\n")
    src = _monitoring(tmp_path)
    readers = [src.create_reader(i, 2) for i in range(2)]
    assert sorted(v for r in readers for v in r.poll_batch(10)) == ["0", "1", "2", "3"]
    merged = readers[0].snapshot() + readers[1].snapshot()
    with pytest.raises(ValueError, match="checkpointed at parallelism 2 and its splits were not redistributed by path"):
        src.create_reader(0, 3, merged)
    # At the same parallelism each subtask resumes and reads nothing again.
    assert [src.create_reader(i, 2, r.snapshot()).poll_batch(10) for i, r in enumerate(readers)] == [[], []]


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_chunk_boundaries_never_split_or_lose_a_line(tmp_path: Path, monkeypatch, chunk: int) -> None:
    """Lines longer than a chunk, CRLF endings, multi-byte characters and an unterminated last line,
    read in tiny chunks and resumed from a snapshot after every batch."""
    import millstream.engine.datastream.connectors.file_source as fs

    monkeypatch.setattr(fs, "CHUNK", chunk)
    lines = ["", "short", "a much longer line than any chunk: ünïcödé ✓", "crlf", "", "last"]
    (tmp_path / "f.txt").write_bytes("\r\n".join(lines[:4]).encode() + b"\r\n\n" + b"last")
    src = _source(tmp_path)
    got: list[str] = []
    position = None
    while True:
        reader = src.create_reader(0, 1, position)
        batch = reader.poll_batch(1)
        position = reader.snapshot()
        reader.close()
        if batch is None:
            break
        got += batch
    assert got == lines
