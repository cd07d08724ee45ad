"""``pyflink.datastream.state_backend``: where keyed state lives.

``HashMapStateBackend`` keeps it on the heap (the default). PyFlink's
``EmbeddedRocksDBStateBackend`` name selects Millstream's embedded on-disk
backend (LMDB with a write-back cache), for state larger than memory.
``EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)`` (or the
job option ``state.backend.incremental: true``, as in Flink) makes its
checkpoints incremental: off by default, as in Flink.
"""
from __future__ import annotations

from enum import Enum

from millstream.engine.compat.unsupported import declare_unsupported


class StateBackend:
    kind = "hashmap"

    def is_incremental_checkpoints_enabled(self) -> bool:
        return False


class HashMapStateBackend(StateBackend):
    kind = "hashmap"


class EmbeddedRocksDBStateBackend(StateBackend):
    kind = "rocksdb"

    def __init__(self, enable_incremental_checkpointing: bool | None = None) -> None:
        self.enable_incremental_checkpointing = bool(enable_incremental_checkpointing)
        self.predefined_options: "PredefinedOptions | None" = None

    def set_predefined_options(self, options: "PredefinedOptions") -> None:
        self.predefined_options = PredefinedOptions(options)

    def get_predefined_options(self) -> "PredefinedOptions":
        return self.predefined_options or PredefinedOptions.DEFAULT

    def is_incremental_checkpoints_enabled(self) -> bool:
        return self.enable_incremental_checkpointing

    # RocksDB tuning: recorded and returned; the LMDB backend keeps its files under the task's state directory.
    def set_db_storage_paths(self, *paths: str) -> None:
        self.db_storage_paths = list(paths)

    def get_db_storage_paths(self) -> list[str]:
        return list(getattr(self, "db_storage_paths", []))

    def set_options(self, options_factory_class_name: str) -> None:
        self.options = options_factory_class_name

    def get_options(self) -> str | None:
        return getattr(self, "options", None)

    def set_number_of_transfer_threads(self, number_of_transfering_threads: int) -> None:
        """Reads of an incremental chain's files at once when a subtask restores (Flink's
        ``state.backend.rocksdb.checkpoint.transfer.thread.num``, default 4; 1 reads them one after another)."""
        threads = int(number_of_transfering_threads)
        if threads < 1:
            raise ValueError(f"the number of transfer threads must be at least 1, got {threads}")
        self.transfer_threads = threads

    def get_number_of_transfer_threads(self) -> int:
        return getattr(self, "transfer_threads", 4)


class PredefinedOptions(Enum):
    """RocksDB tuning profiles. Millstream's on-disk backend is LMDB, which needs none of them:
    ``EmbeddedRocksDBStateBackend.set_predefined_options`` accepts and records the choice."""

    DEFAULT = 0
    SPINNING_DISK_OPTIMIZED = 1
    SPINNING_DISK_OPTIMIZED_HIGH_MEM = 2
    FLASH_SSD_OPTIMIZED = 3


declare_unsupported(
    globals(),
    ["CustomStateBackend"],
    why="custom state backends are Java classes",
    instead="HashMapStateBackend() (heap) or EmbeddedRocksDBStateBackend() (on disk)",
)

__all__ = ["CustomStateBackend", "EmbeddedRocksDBStateBackend", "HashMapStateBackend", "PredefinedOptions", "StateBackend"]
