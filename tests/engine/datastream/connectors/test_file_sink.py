"""FileSink through the sink operator: part-file naming, pending and committed states, restore and clean-up."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from millstream.engine.common.serialization import Encoder, SimpleStringSchema
from millstream.engine.datastream.connectors.file_system import BucketAssigner, FileSink, OutputFileConfig, RollingPolicy
from millstream.engine.runtime.operators.base import OperatorContext
from millstream.engine.runtime.operators.sinks import WriterSinkOperator
from millstream.engine.runtime.task_metrics import TaskIOMetrics


def _sink(base: Path, policy: RollingPolicy | None = None, bucket: BucketAssigner | None = None) -> FileSink:
    b = FileSink.for_row_format(str(base), Encoder.simple_string_encoder()).with_output_file_config(
        OutputFileConfig.builder().with_part_prefix("out").with_part_suffix(".txt").build()
    )
    b = b.with_bucket_assigner(bucket or BucketAssigner.base_path_bucket_assigner())
    return b.with_rolling_policy(policy or RollingPolicy.on_checkpoint_rolling_policy()).build()


def _operator(sink: FileSink, subtask: int = 0, parallelism: int = 1, attempt: int = 0) -> WriterSinkOperator:
    ctx = OperatorContext(
        job_id="job", task_name="sink", operator_name="FileSink", subtask=subtask, parallelism=parallelism,
        max_parallelism=128, attempt=attempt, job_type="STREAMING", metrics=TaskIOMetrics(),
    )
    op = WriterSinkOperator(sink, ctx, {"sink": "writer", "node_id": 3})
    op.open()
    return op


def _checkpoint(op: WriterSinkOperator, cid: int):
    op.prepare_snapshot_pre_barrier(cid)
    return op.snapshot_state()


def _committed(base: Path) -> list[str]:
    """Lines of the visible part files, in file order."""
    lines = []
    for dirpath, _, names in sorted(os.walk(base)):
        for n in sorted(names):
            if not n.startswith("."):
                lines += Path(dirpath, n).read_text().splitlines()
    return lines


def _hidden(base: Path) -> list[str]:
    return sorted(n for _, _, names in os.walk(base) for n in names if n.startswith("."))


def test_public_attributes_the_spark_runner_reads(tmp_path: Path) -> None:
    sink = _sink(tmp_path)
    assert sink.base_path == str(tmp_path)
    assert sink.encoder.encode(("a", 1)) == b"('a', 1)\n"
    assert (sink.output_file_config.part_prefix, sink.output_file_config.part_suffix) == ("out", ".txt")
    assert Encoder.simple_string_encoder("latin-1").encode("é") == "é\n".encode("latin-1")
    assert SimpleStringSchema().deserialize(SimpleStringSchema().serialize(12)) == "12"


def test_records_become_visible_only_when_their_checkpoint_completes(tmp_path: Path) -> None:
    op = _operator(_sink(tmp_path))
    op.process_batch(["a", "b"], None)
    assert _committed(tmp_path) == [] and len(_hidden(tmp_path)) == 1
    state = _checkpoint(op, 1)
    # The pending file is in the checkpoint, still hidden.
    assert [item[0] for item in state] == ["committable"]
    assert _committed(tmp_path) == []
    op.process_batch(["c"], None)
    _checkpoint(op, 2)
    op.notify_checkpoint_complete(1)
    assert _committed(tmp_path) == ["a", "b"]
    op.notify_checkpoint_complete(2)
    assert _committed(tmp_path) == ["a", "b", "c"]
    assert _hidden(tmp_path) == []
    names = sorted(os.listdir(tmp_path))
    assert all(re.fullmatch(r"out-[0-9a-f]{32}-0-\d+\.txt", n) for n in names), names


def test_an_aborted_checkpoint_is_committed_by_the_next_one(tmp_path: Path) -> None:
    op = _operator(_sink(tmp_path))
    op.process_batch(["a"], None)
    _checkpoint(op, 1)  # never completes
    op.process_batch(["b"], None)
    state = _checkpoint(op, 2)
    assert sorted(item[1] for item in state) == [1, 2]  # checkpoint 2 carries 1's committable too
    op.notify_checkpoint_complete(2)
    assert _committed(tmp_path) == ["a", "b"]


def test_restore_cuts_an_in_progress_file_back_to_the_checkpoint_and_commits_it(tmp_path: Path) -> None:
    op = _operator(_sink(tmp_path, RollingPolicy.default_rolling_policy()))
    op.process_batch(["a", "b"], None)
    state = _checkpoint(op, 1)
    assert [item[0] for item in state] == ["writer"]  # the default policy keeps the file open
    op.process_batch(["after-1"], None)  # replayed after the failure: must not show
    op.prepare_snapshot_pre_barrier(2)
    op.snapshot_state()  # checkpoint 2 never completes; the task dies here (no close)
    restored = _operator(_sink(tmp_path, RollingPolicy.default_rolling_policy()), attempt=1)
    restored.restore_state(state)
    assert _committed(tmp_path) == ["a", "b"]
    restored.process_batch(["after-1", "c"], None)
    restored.end_input()
    assert sorted(_committed(tmp_path)) == ["a", "after-1", "b", "c"]  # two writers' files: names sort at random
    # Restoring the same checkpoint again (a second failure) changes nothing.
    again = _operator(_sink(tmp_path, RollingPolicy.default_rolling_policy()), attempt=2)
    again.restore_state(state)
    assert sorted(_committed(tmp_path)) == ["a", "after-1", "b", "c"]


def test_a_zombie_attempt_still_writing_cannot_add_to_the_file_a_restore_committed(tmp_path: Path) -> None:
    """The old attempt of a subtask on a TaskManager that survived a failover may still run for a
    while (the JobManager does not wait for it after a Redis loss or its own restart): records it
    buffered after the checkpoint, and records it writes after the new attempt restored, are
    flushed into the in-progress file when it is cancelled. The restore must commit a copy of
    the checkpointed bytes, never the inode the old attempt still holds open."""
    zombie = _operator(_sink(tmp_path, RollingPolicy.default_rolling_policy()))
    zombie.process_batch(["a", "b"], None)
    state = _checkpoint(zombie, 1)
    zombie.process_batch(["after-1"], None)  # in the writer's buffer, not yet in the file
    restored = _operator(_sink(tmp_path, RollingPolicy.default_rolling_policy()), attempt=1)
    restored.restore_state(state)
    assert _committed(tmp_path) == ["a", "b"]
    zombie.process_batch(["late"], None)
    zombie.writer.snapshot_state(2)  # flushes and syncs what it holds, as a snapshot would
    zombie.close()  # cancelled at last
    assert _committed(tmp_path) == ["a", "b"]
    restored.process_batch(["after-1", "late"], None)  # the replay
    restored.end_input()
    assert sorted(_committed(tmp_path)) == ["a", "after-1", "b", "late"]
    assert [n for n in _hidden(tmp_path) if "recover" in n] == []


def test_committables_committed_before_a_failure_are_committed_again_idempotently(tmp_path: Path) -> None:
    op = _operator(_sink(tmp_path))
    op.process_batch(["a"], None)
    state = _checkpoint(op, 1)
    op.notify_checkpoint_complete(1)  # committed, then the task fails
    _operator(_sink(tmp_path), attempt=1).restore_state(state)
    assert _committed(tmp_path) == ["a"]


def test_committables_not_yet_notified_are_committed_on_restore(tmp_path: Path) -> None:
    op = _operator(_sink(tmp_path))
    op.process_batch(["a"], None)
    state = _checkpoint(op, 1)  # completes, but the task fails before the notification
    _operator(_sink(tmp_path), attempt=1).restore_state(state)
    assert _committed(tmp_path) == ["a"]


def test_a_lost_committable_is_an_error_naming_the_file(tmp_path: Path) -> None:
    op = _operator(_sink(tmp_path))
    op.process_batch(["a"], None)
    state = _checkpoint(op, 1)
    for n in _hidden(tmp_path):
        os.remove(tmp_path / n)
    with pytest.raises(FileNotFoundError, match="cannot commit .*out-"):
        _operator(_sink(tmp_path), attempt=1).restore_state(state)


def test_failed_attempts_in_progress_files_are_deleted_once_every_subtask_restored(tmp_path: Path) -> None:
    old0, old1 = _operator(_sink(tmp_path), 0, 2), _operator(_sink(tmp_path), 1, 2)
    old0.process_batch(["a"], None)
    old1.process_batch(["b"], None)
    s0, s1 = _checkpoint(old0, 1), _checkpoint(old1, 1)
    old0.process_batch(["lost"], None)  # written after checkpoint 1 by the attempt that fails
    old1.process_batch(["lost"], None)
    new0, new1 = _operator(_sink(tmp_path), 0, 2, attempt=1), _operator(_sink(tmp_path), 1, 2, attempt=1)
    new0.restore_state(s0)
    new1.restore_state(s1)
    new0.process_batch(["c"], None)
    assert len(_hidden(tmp_path)) == 3  # two leftovers of attempt 0, and new0's own file
    _checkpoint(new0, 2)
    _checkpoint(new1, 2)
    new0.notify_checkpoint_complete(2)
    new1.notify_checkpoint_complete(2)
    assert sorted(_committed(tmp_path)) == ["a", "b", "c"]
    assert _hidden(tmp_path) == []


def test_a_fresh_first_attempt_deletes_nothing(tmp_path: Path) -> None:
    (tmp_path / f".out-{'0' * 32}-0-0.txt.inprogress").write_text("someone else's\n")
    op = _operator(_sink(tmp_path))
    op.process_batch(["a"], None)
    _checkpoint(op, 1)
    op.notify_checkpoint_complete(1)
    assert len(_hidden(tmp_path)) == 1


def test_end_of_input_commits_everything(tmp_path: Path) -> None:
    op = _operator(_sink(tmp_path, RollingPolicy.default_rolling_policy()))
    op.process_batch(["a"], None)
    _checkpoint(op, 1)
    op.process_batch(["b"], None)
    op.end_input()
    op.close()
    assert _committed(tmp_path) == ["a", "b"]
    assert _hidden(tmp_path) == [".out-job-3-0.finished"]  # the subtask's end-of-input marker


def test_a_subtask_that_finished_writes_nothing_again_when_the_job_fails_over_later(tmp_path: Path) -> None:
    op = _operator(_sink(tmp_path, RollingPolicy.default_rolling_policy()))
    op.process_batch(["a"], None)
    state = _checkpoint(op, 1)
    op.process_batch(["b"], None)
    op.end_input()  # everything committed; then another subtask fails and the job fails over
    restored = _operator(_sink(tmp_path, RollingPolicy.default_rolling_policy()), attempt=1)
    restored.restore_state(state)
    restored.process_batch(["b"], None)  # the replay after checkpoint 1
    _checkpoint(restored, 2)
    restored.notify_checkpoint_complete(2)
    restored.end_input()
    assert sorted(_committed(tmp_path)) == ["a", "b"]
    # Another job (or a subtask that did not finish) writes as usual.
    other = _operator(_sink(tmp_path), subtask=1, parallelism=2, attempt=1)
    other.restore_state([])
    other.process_batch(["c"], None)
    other.end_input()
    assert sorted(_committed(tmp_path)) == ["a", "b", "c"]


def test_size_based_rolling_makes_several_parts(tmp_path: Path) -> None:
    op = _operator(_sink(tmp_path, RollingPolicy.default_rolling_policy(part_size=10)))
    op.process_batch([f"line{i}" for i in range(10)], None)  # 6 bytes a line: a new part every 2 lines
    op.end_input()
    assert sorted(_committed(tmp_path)) == sorted(f"line{i}" for i in range(10))
    assert len([n for n in os.listdir(tmp_path) if not n.startswith(".")]) == 5


def test_date_time_buckets_are_directories(tmp_path: Path) -> None:
    op = _operator(_sink(tmp_path, bucket=BucketAssigner.date_time_bucket_assigner("yyyy-MM-dd", "UTC")))
    op.process_batch(["a"], None)
    op.end_input()
    (bucket,) = [n for n in os.listdir(tmp_path) if not n.startswith(".")]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", bucket)
    assert _committed(tmp_path) == ["a"]


def test_bad_configuration_is_named(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="needs an Encoder"):
        FileSink.for_row_format(str(tmp_path), "utf-8")
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        FileSink.for_row_format(str(tmp_path / "f"), Encoder.simple_string_encoder())
    with pytest.raises(ValueError, match="part_size must be a positive int"):
        RollingPolicy.default_rolling_policy(part_size=0)
    with pytest.raises(ValueError, match="path separators"):
        OutputFileConfig.builder().with_part_prefix("a/b").build()
    with pytest.raises(ValueError, match="unknown time zone"):
        BucketAssigner.date_time_bucket_assigner(timezone_id="Mars/Olympus")
