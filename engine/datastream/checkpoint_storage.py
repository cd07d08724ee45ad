"""``pyflink.datastream.checkpoint_storage``: where completed checkpoints are written.

Millstream writes checkpoints to a directory (local or a shared volume). A
``FileSystemCheckpointStorage`` names that directory; ``JobManagerCheckpointStorage``
(Flink's in-memory store) maps to the default directory, since a Millstream
checkpoint must survive a JobManager restart. ``CheckpointConfig.set_checkpoint_storage`` /
``CheckpointConfig.set_checkpoint_storage_dir`` apply them.
"""
from __future__ import annotations

from millstream.engine.compat.unsupported import declare_unsupported

__all__ = ["CheckpointStorage", "CustomCheckpointStorage", "FileSystemCheckpointStorage", "JobManagerCheckpointStorage"]


class CheckpointStorage:
    """Base of the storages; ``directory`` is None for the cluster's default directory."""

    directory: str | None = None


class JobManagerCheckpointStorage(CheckpointStorage):
    """Flink keeps these checkpoints in JobManager memory; Millstream uses the default directory."""

    DEFAULT_MAX_STATE_SIZE = 5 * 1024 * 1024

    def __init__(self, checkpoint_path: str | None = None, max_state_size: int | None = None) -> None:
        self.directory = checkpoint_path
        self.max_state_size = max_state_size if max_state_size is not None else self.DEFAULT_MAX_STATE_SIZE

    def get_savepoint_path(self) -> str | None:
        return None

    def get_checkpoint_path(self) -> str | None:
        return self.directory

    def get_max_state_size(self) -> int | None:
        return self.max_state_size


class FileSystemCheckpointStorage(CheckpointStorage):
    MAX_FILE_STATE_THRESHOLD = 1024 * 1024

    def __init__(
        self,
        checkpoint_path: str,
        file_state_size_threshold: int | None = None,
        write_buffer_size: int = -1,
        savepoint_path: str | None = None,
    ) -> None:
        if not checkpoint_path:
            raise ValueError("FileSystemCheckpointStorage needs a checkpoint path")
        # Recorded only: Millstream writes each task's state as one file, whatever its size.
        self.file_state_size_threshold = file_state_size_threshold if file_state_size_threshold is not None else 20 * 1024
        self.write_buffer_size = write_buffer_size if write_buffer_size > 0 else 4096
        self.savepoint_path = savepoint_path
        # Flink accepts URIs; a file:// one is a local directory here.
        self.directory = checkpoint_path[len("file://") :] if checkpoint_path.startswith("file://") else checkpoint_path

    def get_checkpoint_path(self) -> str:
        return self.directory  # type: ignore[return-value]

    def get_savepoint_path(self) -> str | None:
        return self.savepoint_path

    def get_min_file_size_threshold(self) -> int:
        return self.file_state_size_threshold

    def get_write_buffer_size(self) -> int:
        return self.write_buffer_size


declare_unsupported(
    globals(),
    ["CustomCheckpointStorage"],
    why="custom checkpoint storages are Java classes",
    instead="FileSystemCheckpointStorage(path) or CheckpointConfig.set_checkpoint_storage_dir(path)",
)
