"""``pyflink.datastream.state_backend``: where keyed state lives.

``HashMapStateBackend`` keeps it on the heap (the default). PyFlink's
``EmbeddedRocksDBStateBackend`` name selects Millstream's embedded on-disk
backend (LMDB with a write-back cache), for state larger than memory.
"""
from __future__ import annotations


class StateBackend:
    kind = "hashmap"


class HashMapStateBackend(StateBackend):
    kind = "hashmap"


class EmbeddedRocksDBStateBackend(StateBackend):
    kind = "rocksdb"

    def __init__(self, enable_incremental_checkpointing: bool | None = None) -> None:
        self.enable_incremental_checkpointing = bool(enable_incremental_checkpointing)
