"""FileSink and FileSource at an fsspec URL, through the sink operator, on fsspec's in-memory file
system (a real fsspec implementation in this process; the S3 and FTP servers are in
tests/integration/test_remote_files.py). A part open at a checkpoint is closed and uploaded whole as
a hidden object, becomes visible only when the checkpoint completes, and the writer state holds no
in-progress file; a failed attempt's uploaded parts are deleted after the restore."""
from __future__ import annotations

import uuid

import fsspec
import pytest

from millstream.engine.common.serialization import Encoder
from millstream.engine.datastream.connectors.file_system import BucketAssigner, FileSink, FileSource, OutputFileConfig, RollingPolicy, StreamFormat
from tests.engine.datastream.connectors.test_file_sink import _checkpoint, _operator

MEMORY = fsspec.filesystem("memory")


@pytest.fixture
def base() -> str:
    url = f"memory://sink-{uuid.uuid4().hex}"
    yield url
    MEMORY.rm(url, recursive=True) if MEMORY.exists(url) else None


def _sink(base: str) -> FileSink:
    return (
        FileSink.for_row_format(base, Encoder.simple_string_encoder())
        .with_output_file_config(OutputFileConfig.builder().with_part_prefix("out").with_part_suffix(".txt").build())
        .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner())
        # The default policy would keep a local part open across checkpoints; at a URL it is closed anyway.
        .with_rolling_policy(RollingPolicy.default_rolling_policy())
        .build()
    )


def _names(base: str) -> list[str]:
    return sorted(p.rsplit("/", 1)[-1] for p in MEMORY.find(base)) if MEMORY.exists(base) else []


def _committed(base: str) -> list[str]:
    return [
        line
        for p in sorted(MEMORY.find(base)) if not p.rsplit("/", 1)[-1].startswith(".")
        for line in MEMORY.cat_file(p).decode().splitlines()
    ]


def test_a_part_open_at_a_checkpoint_is_uploaded_hidden_and_committed_when_it_completes(base: str) -> None:
    op = _operator(_sink(base))
    op.process_batch(["a", "b"], [None, None])
    assert _names(base) == []  # still on this machine only
    state = _checkpoint(op, 1)
    assert [item[0] for item in state] == ["committable"]  # no in-progress file in the writer state
    (hidden,) = _names(base)
    assert hidden.startswith(".out-") and hidden.endswith(".txt.inprogress")
    assert _committed(base) == []
    op.notify_checkpoint_complete(1)
    assert _committed(base) == ["a", "b"] and not [n for n in _names(base) if n.startswith(".")]
    op.close()


def test_a_restore_commits_the_checkpoint_and_drops_the_failed_attempts_later_parts(base: str) -> None:
    op = _operator(_sink(base))
    op.process_batch(["a"], [None])
    state = _checkpoint(op, 1)
    op.process_batch(["b"], [None])
    _checkpoint(op, 2)  # uploaded, never completed: the attempt dies
    op.close()
    assert len(_names(base)) == 2 and _committed(base) == []

    again = _operator(_sink(base), attempt=1)
    again.restore_state(state)
    assert _committed(base) == ["a"]
    again.restore_state(state)  # a second restore of the same checkpoint commits nothing twice
    assert _committed(base) == ["a"]
    again.process_batch(["b"], [None])
    _checkpoint(again, 3)
    again.notify_checkpoint_complete(3)
    assert sorted(_committed(base)) == ["a", "b"]
    assert not [n for n in _names(base) if n.startswith(".")], _names(base)
    again.close()


def test_a_file_source_reads_a_url_tree_and_skips_hidden_files(base: str) -> None:
    MEMORY.pipe_file(f"{base}/in/a.txt", b"one\ntwo\n")
    MEMORY.pipe_file(f"{base}/in/deeper/b.txt", b"three")
    MEMORY.pipe_file(f"{base}/in/.hidden", b"never\n")
    MEMORY.pipe_file(f"{base}/in/_SUCCESS", b"never\n")
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), f"{base}/in").build()
    reader = source.create_reader(0, 1)
    lines = []
    while (batch := reader.poll_batch(10)) is not None:
        lines += batch
    assert sorted(lines) == ["one", "three", "two"]
    assert sorted(p for p, _ in reader.snapshot()) == [f"{base}/in/a.txt", f"{base}/in/deeper/b.txt"]


def test_a_url_whose_scheme_has_no_package_is_refused_at_build(base: str) -> None:
    with pytest.raises(ValueError, match="gs://"):
        FileSink.for_row_format("gs://bucket/out", Encoder.simple_string_encoder())
    with pytest.raises(ValueError, match="nosuchscheme://"):
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), "nosuchscheme://x/y")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        FileSource.for_record_stream_format(StreamFormat.text_line_format(), f"{base}/missing").build()
