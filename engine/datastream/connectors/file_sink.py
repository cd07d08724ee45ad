"""``FileSink`` for row formats: part files committed by atomic rename when their checkpoint completes.

Records go to one hidden in-progress part file per bucket,
``.<prefix>-<uuid>-<subtask>-<n><suffix>.inprogress``. When the rolling policy
says so the file is closed and becomes *pending*; a pending file is a
committable ``[in-progress path, final path, length]`` that goes into the
checkpoint and is renamed (``os.replace``) to its final, visible name once that
checkpoint completes. A file still open at a checkpoint is recorded as
``[bucket, in-progress path, length, final path]`` in the writer's state; on
restore that many bytes are copied to the final name, so the bytes written after
the checkpoint, which the sources will replay, never become visible, even when
the failed attempt is still alive and writing to the file it had open. Once every
subtask has restored (the first checkpoint completed after it), in-progress
files left by failed attempts of this subtask are deleted. A subtask that
committed all its output at the end of its input leaves a hidden
``.<prefix>-<job>-<operator>-<subtask>.finished`` marker, so that if the job
fails over afterwards (another task failed) the replay writes nothing twice.

The base path may also be an fsspec URL (``s3://bucket/out``, ``ftp://host/out``...; see
``file_paths``). An object store cannot append to an object nor show a prefix of one, so there a
part is written to a local staging file and made durable, whole, as the hidden in-progress object
when it is closed; and, as Flink's FileSink does on S3 (its recoverable writer persists an
in-progress part at every checkpoint), a part open at a checkpoint is closed by it: every part
goes into the checkpoint as a pending committable, and the writer state holds none. The commit
moves the hidden object to its final name (a rename where the store has one, copy and delete on
S3). Parts of checkpoints that never complete stay hidden and are deleted like a failed attempt's.
"""
from __future__ import annotations

import os
import re
import tempfile
import time
import uuid
from datetime import datetime, timezone
from typing import Any, BinaryIO

from millstream.engine.common.serialization import Encoder
from millstream.engine.compat.unsupported import unsupported_class
from millstream.engine.checkpoint.filesystem import is_remote
from millstream.engine.compat.unsupported import java_only, unsupported_method
from millstream.engine.datastream.connectors.file_paths import normalise, remote_files
from millstream.engine.datastream.connectors.sink import Committer, InitContext, Sink, SinkWriter

IN_PROGRESS = ".inprogress"
FINISHED = ".finished"


class OutputFileConfig:
    """Part file names: ``<prefix>-<uuid>-<subtask>-<counter><suffix>``."""

    get_java_object = java_only("the OutputFileConfig itself, FileSink.for_row_format(...).with_output_file_config(config)")

    def __init__(self, part_prefix: str = "part", part_suffix: str = "") -> None:
        for what, v in (("part prefix", part_prefix), ("part suffix", part_suffix)):
            if not isinstance(v, str) or os.sep in v or (os.altsep and os.altsep in v):
                raise ValueError(f"the {what} must be a string without path separators, got {v!r}")
        self.part_prefix = part_prefix
        self.part_suffix = part_suffix

    @staticmethod
    def builder() -> "OutputFileConfigBuilder":
        return OutputFileConfigBuilder()

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix


class OutputFileConfigBuilder:
    def __init__(self) -> None:
        self.part_prefix = "part"
        self.part_suffix = ""

    def with_part_prefix(self, prefix: str) -> "OutputFileConfigBuilder":
        self.part_prefix = prefix
        return self

    def with_part_suffix(self, suffix: str) -> "OutputFileConfigBuilder":
        self.part_suffix = suffix
        return self

    def build(self) -> OutputFileConfig:
        return OutputFileConfig(self.part_prefix, self.part_suffix)


class RollingPolicy:
    """When an in-progress part file is closed: Flink's default (size, age, inactivity) or on every checkpoint."""

    get_java_object = java_only("the RollingPolicy itself, FileSink.for_row_format(...).with_rolling_policy(policy)")

    def __init__(self, on_checkpoint: bool, part_size: int, rollover_interval: int, inactivity_interval: int) -> None:
        for what, v in (("part_size", part_size), ("rollover_interval", rollover_interval), ("inactivity_interval", inactivity_interval)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"RollingPolicy {what} must be a positive int, got {v!r}")
        self.on_checkpoint = on_checkpoint
        self.part_size = part_size
        self.rollover_interval = rollover_interval
        self.inactivity_interval = inactivity_interval

    @staticmethod
    def default_rolling_policy(
        part_size: int = 1024 * 1024 * 128, rollover_interval: int = 60 * 1000, inactivity_interval: int = 60 * 1000
    ) -> "RollingPolicy":
        return RollingPolicy(False, part_size, rollover_interval, inactivity_interval)

    @staticmethod
    def on_checkpoint_rolling_policy() -> "RollingPolicy":
        return RollingPolicy(True, 2**62, 2**62, 2**62)

    def should_roll_on_event(self, size: int) -> bool:
        return size >= self.part_size

    def should_roll_on_processing_time(self, created_ms: int, last_write_ms: int, now_ms: int) -> bool:
        return now_ms - created_ms >= self.rollover_interval or now_ms - last_write_ms >= self.inactivity_interval

    def should_roll_on_checkpoint(self, size: int) -> bool:
        return self.on_checkpoint or size >= self.part_size


_JAVA_DATE = [("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S")]


class BucketAssigner:
    """Which sub-directory of the base path a record goes to."""

    get_java_object = java_only("the BucketAssigner itself, FileSink.for_row_format(...).with_bucket_assigner(assigner)")

    def __init__(self, format_str: str | None, timezone_id: str | None = None) -> None:
        self.format_str = format_str
        self.timezone_id = timezone_id
        self._strftime: str | None = None
        self._tz: Any = None
        self._cached: tuple[int, str] = (-1, "")  # (second, bucket id): strftime per record is slow
        if format_str is not None:
            fmt = format_str
            for java, c in _JAVA_DATE:
                fmt = fmt.replace(java, c)
            self._strftime = fmt
            if timezone_id is not None:
                from zoneinfo import ZoneInfo

                try:
                    self._tz = ZoneInfo(timezone_id)
                except Exception:
                    raise ValueError(f"unknown time zone {timezone_id!r}") from None

    @staticmethod
    def base_path_bucket_assigner() -> "BucketAssigner":
        """Everything in the base path itself."""
        return BucketAssigner(None)

    @staticmethod
    def date_time_bucket_assigner(format_str: str = "yyyy-MM-dd--HH", timezone_id: str | None = None) -> "BucketAssigner":
        """One directory per processing-time period, named with a Java date pattern (Flink's default)."""
        return BucketAssigner(format_str, timezone_id)

    def get_bucket_id(self, value: Any, now_ms: int) -> str:
        if self._strftime is None:
            return ""
        second = now_ms // 1000
        if self._cached[0] != second:
            tz = self._tz if self._tz is not None else datetime.now().astimezone().tzinfo
            self._cached = (second, datetime.fromtimestamp(second, tz or timezone.utc).strftime(self._strftime))
        return self._cached[1]


class _Part:
    __slots__ = ("bucket", "tmp", "final", "file", "staging", "size", "created_ms", "last_write_ms")

    def __init__(self, bucket: str, tmp: str, final: str, file: BinaryIO, now_ms: int, staging: str | None = None) -> None:
        self.bucket, self.tmp, self.final, self.file = bucket, tmp, final, file
        self.staging = staging  # the local file a part bound for a URL is written to until it closes
        self.size = 0
        self.created_ms = self.last_write_ms = now_ms


def _now_ms() -> int:
    return int(time.time() * 1000)


class FileCommitter(Committer):
    """Renames pending part files to their final names; idempotent, so a replayed commit is harmless.
    A committable without an in-progress path is a subtask's end-of-input marker: it is created."""

    def commit(self, committables: list[Any]) -> None:
        for tmp, final, length in committables:
            if tmp is None:
                if is_remote(final):
                    remote_files(final).write(final, b"")
                else:
                    with open(final, "ab"):
                        pass
                continue
            commit_part(tmp, final, length)


def commit_part(tmp: str, final: str, length: int) -> None:
    """Make the first ``length`` bytes of ``tmp`` visible as ``final``."""
    if is_remote(final):
        files = remote_files(final)
        if files.exists(tmp):
            # Uploaded whole when it closed, so it is exactly ``length`` bytes: moved as it is.
            files.move(tmp, final)
        elif not files.exists(final):
            raise FileNotFoundError(
                f"FileSink cannot commit {final!r}: neither it nor its in-progress file {tmp!r} exists"
            )
        return
    if os.path.exists(tmp):
        if os.path.getsize(tmp) > length:
            # Bytes written after the checkpoint that covers this file: the sources replay them.
            os.truncate(tmp, length)
        os.replace(tmp, final)
    elif not os.path.exists(final):
        raise FileNotFoundError(
            f"FileSink cannot commit {final!r}: neither it nor its in-progress file {tmp!r} exists"
        )


RECOVERING = ".recovering"


def recover_in_progress(tmp: str, final: str, length: int) -> None:
    """Make the first ``length`` bytes of an in-progress file recorded in a checkpoint visible as
    ``final``, from a new attempt of the writer that had it open.

    The old attempt may still be alive (cancellation is asynchronous, and after a Redis loss or a
    JobManager restart the new attempt does not wait for it) and still hold the file open: what it
    buffered after the checkpoint, or writes later, lands in that inode when it flushes or closes.
    Renaming the inode would publish those bytes, which the sources replay, twice. So the
    checkpointed prefix is copied into a file of its own and the old inode is unlinked; the copy
    is bounded by the rolling policy's part size. Idempotent: a second restore of the same
    checkpoint finds the file committed, or copies the same bytes again.
    """
    if is_remote(final):
        # Parts bound for a URL are closed at every checkpoint, so none is recorded in progress;
        # state that names one anyway (written by hand, or by a later version) is honoured.
        files = remote_files(final)
        if files.exists(final):
            return
        if not files.exists(tmp):
            raise FileNotFoundError(
                f"FileSink cannot commit {final!r}: neither it nor its in-progress file {tmp!r} exists"
            )
        files.write(final, files.read(tmp, 0, length))
        files.remove(tmp)
        return
    if not os.path.exists(tmp):
        if os.path.exists(final):
            return  # an earlier restore of this checkpoint committed it
        raise FileNotFoundError(
            f"FileSink cannot commit {final!r}: neither it nor its in-progress file {tmp!r} exists"
        )
    staging = (tmp[: -len(IN_PROGRESS)] if tmp.endswith(IN_PROGRESS) else tmp) + RECOVERING
    with open(tmp, "rb") as src, open(staging, "wb") as dst:
        if os.path.getsize(tmp) < length:
            raise ValueError(
                f"FileSink cannot commit {final!r}: its in-progress file {tmp!r} is shorter than the "
                f"{length} bytes the checkpoint recorded (the file was changed outside the sink)"
            )
        left = length
        while left > 0:
            try:  # in the kernel, without the bytes passing through Python
                sent = os.copy_file_range(src.fileno(), dst.fileno(), left, length - left, length - left)
            except (AttributeError, OSError):  # not Linux, or a file system that will not
                sent = 0
            if sent <= 0:
                src.seek(length - left)
                chunk = src.read(min(left, 1 << 20))
                dst.seek(length - left)
                dst.write(chunk)
                dst.flush()
                sent = len(chunk)
            left -= sent
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(staging, final)
    os.unlink(tmp)


class FileWriter(SinkWriter):
    """One subtask's writer: an in-progress part per bucket, pending parts until they are committed."""

    def __init__(
        self,
        sink: "FileSink",
        subtask: int,
        parallelism: int,
        clean_up_after_restore: bool,
        finished_marker: str | None = None,
    ) -> None:
        self.sink = sink
        self.subtask = subtask
        self.parallelism = parallelism
        self.uuid = uuid.uuid4().hex  # new for every attempt: part names never clash across attempts
        self.counter = 0
        self.parts: dict[str, _Part] = {}
        self.pending: list[list[Any]] = []
        self.clean_up_due = clean_up_after_restore
        self.finished_marker = finished_marker
        self.ended = False
        self.encode = sink.encoder.encode
        self.assigner = sink.bucket_assigner
        self.policy = sink.rolling_policy
        self.remote = is_remote(sink.base_path)

    def _open_part(self, bucket: str, now_ms: int) -> _Part:
        cfg = self.sink.output_file_config
        name = f"{cfg.part_prefix}-{self.uuid}-{self.subtask}-{self.counter}{cfg.part_suffix}"
        self.counter += 1
        if self.remote:
            directory = f"{self.sink.base_path}/{bucket}" if bucket else self.sink.base_path
            fd, staging = tempfile.mkstemp(prefix=f"millstream-filesink-{name}-")
            tmp = f"{directory}/.{name}{IN_PROGRESS}"
            part = _Part(bucket, tmp, f"{directory}/{name}", os.fdopen(fd, "wb"), now_ms, staging)
        else:
            directory = os.path.join(self.sink.base_path, bucket) if bucket else self.sink.base_path
            os.makedirs(directory, exist_ok=True)
            tmp = os.path.join(directory, f".{name}{IN_PROGRESS}")
            part = _Part(bucket, tmp, os.path.join(directory, name), open(tmp, "wb"), now_ms)
        self.parts[bucket] = part
        return part

    def _roll(self, part: _Part) -> None:
        part.file.flush()
        if part.staging is None:
            os.fsync(part.file.fileno())
        part.file.close()
        if part.staging is not None:
            # Durable on the store before the checkpoint that holds its committable can complete.
            files = remote_files(part.tmp)
            files.makedirs(part.tmp.rsplit("/", 1)[0])
            files.upload(part.staging, part.tmp)
            os.unlink(part.staging)
        del self.parts[part.bucket]
        self.pending.append([part.tmp, part.final, part.size])

    def write(self, value: Any) -> None:
        now = _now_ms()
        bucket = self.assigner.get_bucket_id(value, now)
        part = self.parts.get(bucket)
        if part is not None and (
            self.policy.should_roll_on_event(part.size)
            or self.policy.should_roll_on_processing_time(part.created_ms, part.last_write_ms, now)
        ):
            self._roll(part)
            part = None
        if part is None:
            part = self._open_part(bucket, now)
        data = self.encode(value)
        part.file.write(data)
        part.size += len(data)
        part.last_write_ms = now

    def flush(self, end_of_input: bool) -> None:
        if end_of_input:
            self.ended = True
            for part in list(self.parts.values()):
                self._roll(part)

    def prepare_commit(self) -> list[Any]:
        now = _now_ms()
        for part in list(self.parts.values()):
            if self.remote or self.policy.should_roll_on_checkpoint(part.size) or self.policy.should_roll_on_processing_time(
                part.created_ms, part.last_write_ms, now
            ):
                self._roll(part)
        out, self.pending = self.pending, []
        if self.ended and self.finished_marker is not None:
            # Committed after every part: from then on a replay of this subtask's input writes nothing.
            out.append([None, self.finished_marker, None])
        return out

    def snapshot_state(self, checkpoint_id: int) -> list[Any]:
        state = []
        for part in self.parts.values():
            if part.staging is not None:
                # Only when a checkpoint snapshots without prepare_commit, which the runtime never does.
                raise RuntimeError(f"FileSink part {part.final!r} bound for a URL was still open at a checkpoint")
            # Durable up to ``size`` before the checkpoint can complete: restore cuts back to it.
            part.file.flush()
            os.fsync(part.file.fileno())
            state.append([part.bucket, part.tmp, part.size, part.final])
        return state

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.clean_up_due:
            # Every subtask restored (and committed what it recovered) before this checkpoint
            # could complete, so any other in-progress file of this subtask is a failed attempt's.
            self.clean_up_due = False
            self.clean_up()

    def clean_up(self) -> None:
        """Delete in-progress files of this subtask index left by other attempts (subtask 0 also
        takes indices beyond the parallelism, left by a job that ran with more subtasks)."""
        cfg = self.sink.output_file_config
        pattern = re.compile(
            r"^\." + re.escape(cfg.part_prefix) + r"-([0-9a-f]{32})-(\d+)-\d+" + re.escape(cfg.part_suffix)
            + re.escape(IN_PROGRESS) + "$"
        )
        if self.remote:
            files = remote_files(self.sink.base_path)
            found = files.find(self.sink.base_path) if files.exists(self.sink.base_path) else []
            candidates = [(url, url.rsplit("/", 1)[-1]) for url in found]
        else:
            candidates = [
                (os.path.join(dirpath, name), name)
                for dirpath, _, filenames in os.walk(self.sink.base_path)
                for name in filenames
            ]
        for path, name in candidates:
            m = pattern.match(name)
            if m is None or m.group(1) == self.uuid:
                continue
            index = int(m.group(2))
            if index == self.subtask or (self.subtask == 0 and index >= self.parallelism):
                if self.remote:
                    remote_files(path).remove(path)
                    continue
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass

    def close(self) -> None:
        # Files still open belong to no checkpoint that will complete: they stay hidden (a part
        # bound for a URL never left this machine).
        for part in self.parts.values():
            part.file.close()
            if part.staging is not None:
                try:
                    os.unlink(part.staging)
                except FileNotFoundError:
                    pass
        self.parts.clear()


class _FinishedWriter(FileWriter):
    """The writer of a subtask whose whole output is already committed: it drops what it is given."""

    def write(self, value: Any) -> None:
        pass


class FileSink(Sink):
    """Exactly-once row-format file sink. Build with ``FileSink.for_row_format(base_path, encoder)``."""

    # PyFlink's FileSink hands its compaction topology (a Java StreamTransformer) to sink_to() here;
    # Millstream's FileSink does not compact, and pre-processing topologies do not exist (base.py).
    get_transformer = unsupported_method(
        "sink pre-processing topologies (Java sink transformers, which carry FileSink's file compaction) "
        "are not implemented",
        "ordinary DataStream operators before sink_to()",
    )

    def __init__(
        self,
        base_path: str,
        encoder: Encoder,
        output_file_config: OutputFileConfig,
        rolling_policy: RollingPolicy,
        bucket_assigner: BucketAssigner,
        bucket_check_interval: int,
    ) -> None:
        self.base_path = base_path
        self.encoder = encoder
        self.output_file_config = output_file_config
        self.rolling_policy = rolling_policy
        self.bucket_assigner = bucket_assigner
        self.bucket_check_interval = bucket_check_interval

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> "RowFormatBuilder":
        return RowFormatBuilder(base_path, encoder)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: Any) -> Any:
        from millstream.engine.compat.unsupported import not_supported

        raise not_supported(
            "FileSink.for_bulk_format", "bulk (columnar) writers are Java-side formats",
            "FileSink.for_row_format(path, Encoder.simple_string_encoder())",
        )

    def create_writer(self, subtask: int, parallelism: int) -> SinkWriter:
        return FileWriter(self, subtask, parallelism, clean_up_after_restore=False)

    def finished_marker(self, context: InitContext) -> str:
        """The hidden file that says this job's subtask committed all its input at its end."""
        cfg = self.output_file_config
        name = f".{cfg.part_prefix}-{context.job_id}-{context.operator_id}-{context.subtask}{FINISHED}"
        if is_remote(self.base_path):
            return f"{self.base_path}/{name}"
        return os.path.join(self.base_path, name)

    def restore_writer(self, context: InitContext, recovered_state: list[Any]) -> SinkWriter:
        # A file that was in progress at the checkpoint holds exactly the checkpoint's data up to
        # its recorded length: commit that much now rather than resuming it.
        for item in recovered_state:
            if not (isinstance(item, (list, tuple)) and len(item) == 4):
                raise ValueError(f"FileSink cannot restore writer state {item!r}: expected [bucket, path, length, final]")
            _, tmp, length, final = item
            recover_in_progress(tmp, final, int(length))
        marker = self.finished_marker(context) if context.job_id and context.restarts_finished_tasks else None
        cls = FileWriter
        if marker is not None and (remote_files(marker).exists(marker) if is_remote(marker) else os.path.exists(marker)):
            # This subtask committed everything up to its end of input before the job failed over
            # (another task failed after it finished): what it is given again was written then.
            cls = _FinishedWriter
        return cls(
            self, context.subtask, context.parallelism,
            clean_up_after_restore=context.restored or context.attempt > 0, finished_marker=marker,
        )

    def create_committer(self) -> Committer:
        return FileCommitter()

    def name(self) -> str:
        return "FileSink"


class RowFormatBuilder:
    """PyFlink's ``FileSink.RowFormatBuilder``."""

    def __init__(self, base_path: str, encoder: Encoder) -> None:
        base_path = normalise(base_path, "FileSink")
        if not isinstance(encoder, Encoder):
            raise TypeError(f"FileSink.for_row_format needs an Encoder, got {type(encoder).__name__}")
        if not is_remote(base_path) and os.path.exists(base_path) and not os.path.isdir(base_path):
            raise ValueError(f"FileSink base path {base_path!r} is a file, not a directory")
        self.base_path = base_path
        self.encoder = encoder
        self.output_file_config = OutputFileConfig()
        self.rolling_policy = RollingPolicy.default_rolling_policy()
        self.bucket_assigner = BucketAssigner.date_time_bucket_assigner()
        self.bucket_check_interval = 60 * 1000

    def with_bucket_assigner(self, bucket_assigner: BucketAssigner) -> "RowFormatBuilder":
        if not isinstance(bucket_assigner, BucketAssigner):
            raise TypeError(f"with_bucket_assigner needs a BucketAssigner, got {type(bucket_assigner).__name__}")
        self.bucket_assigner = bucket_assigner
        return self

    def with_rolling_policy(self, rolling_policy: RollingPolicy) -> "RowFormatBuilder":
        if not isinstance(rolling_policy, RollingPolicy):
            raise TypeError(f"with_rolling_policy needs a RollingPolicy, got {type(rolling_policy).__name__}")
        self.rolling_policy = rolling_policy
        return self

    def with_output_file_config(self, output_file_config: OutputFileConfig) -> "RowFormatBuilder":
        if not isinstance(output_file_config, OutputFileConfig):
            raise TypeError(f"with_output_file_config needs an OutputFileConfig, got {type(output_file_config).__name__}")
        self.output_file_config = output_file_config
        return self

    def with_bucket_check_interval(self, interval: int) -> "RowFormatBuilder":
        """Kept for PyFlink compatibility: time-based rolling is checked on every write and checkpoint."""
        self.bucket_check_interval = int(interval)
        return self

    def build(self) -> FileSink:
        return FileSink(
            self.base_path, self.encoder, self.output_file_config, self.rolling_policy,
            self.bucket_assigner, self.bucket_check_interval,
        )


# PyFlink names the builders as nested classes.
FileSink.RowFormatBuilder = RowFormatBuilder  # type: ignore[attr-defined]
FileSink.BaseBuilder = RowFormatBuilder  # type: ignore[attr-defined]  # the only builder kind here
FileSink.BulkFormatBuilder = unsupported_class(  # type: ignore[attr-defined]
    "BulkFormatBuilder", __name__, "bulk (columnar) writers are Java-side formats",
    "FileSink.for_row_format(path, Encoder.simple_string_encoder())",
)
OutputFileConfig.OutputFileConfigBuilder = OutputFileConfigBuilder  # type: ignore[attr-defined]
