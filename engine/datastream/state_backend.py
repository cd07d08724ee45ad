"""``pyflink.datastream.state_backend``: where keyed state lives.

``HashMapStateBackend`` keeps it on the heap (the default). PyFlink's
``EmbeddedRocksDBStateBackend`` name selects Millstream's embedded on-disk
backend (LMDB with a write-back cache), for state larger than memory.
"""
from __future__ import annotations

from enum import Enum

from engine.compat.unsupported import declare_unsupported


class StateBackend:
    kind = "hashmap"


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
