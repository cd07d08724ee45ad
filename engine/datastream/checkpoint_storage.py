"""``pyflink.datastream.checkpoint_storage``: where completed checkpoints are written.

Millstream writes checkpoints to a directory (local or a shared volume). A
``FileSystemCheckpointStorage`` names that directory; ``JobManagerCheckpointStorage``
(Flink's in-memory store) maps to the default directory, since a Millstream
checkpoint must survive a JobManager restart. ``CheckpointConfig.set_checkpoint_storage`` /
``CheckpointConfig.set_checkpoint_storage_dir`` apply them.
"""
from __future__ import annotations

from engine.compat.unsupported import declare_unsupported

__all__ = ["CheckpointStorage", "CustomCheckpointStorage", "FileSystemCheckpointStorage", "JobManagerCheckpointStorage"]


class CheckpointStorage:
    """Base of the storages; ``directory`` is None for the cluster's default directory."""

    directory: str | None = None


class JobManagerCheckpointStorage(CheckpointStorage):
    """Flink keeps these checkpoints in JobManager memory; Millstream uses the default directory."""

    def __init__(self, checkpoint_path: str | None = None, max_state_size: int | None = None) -> None:
        self.directory = checkpoint_path
        self.max_state_size = max_state_size

    def get_checkpoint_path(self) -> str | None:
        return self.directory

    def get_max_state_size(self) -> int | None:
        return self.max_state_size


class FileSystemCheckpointStorage(CheckpointStorage):
    def __init__(self, checkpoint_path: str, file_state_size_threshold: int | None = None, write_buffer_size: int = -1) -> None:
        if not checkpoint_path:
            raise ValueError("FileSystemCheckpointStorage needs a checkpoint path")
        # Flink accepts URIs; a file:// one is a local directory here.
        self.directory = checkpoint_path[len("file://") :] if checkpoint_path.startswith("file://") else checkpoint_path

    def get_checkpoint_path(self) -> str:
        return self.directory  # type: ignore[return-value]


declare_unsupported(
    globals(),
    ["CustomCheckpointStorage"],
    why="custom checkpoint storages are Java classes",
    instead="FileSystemCheckpointStorage(path) or CheckpointConfig.set_checkpoint_storage_dir(path)",
)
