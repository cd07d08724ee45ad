"""The record format of the on-disk keyed state backend, shared with snapshots and restores.

An LMDB key is the key group of the state key as two big-endian bytes, then the encoded key (its
pickle, or a packed canonical form or digest, see ``lmdb_backend``). With the key group first, the
records of one key group are contiguous and sorted, so a snapshot copies raw records grouped by key
group without unpickling anything, and a restore takes the key groups it owns by a byte compare. A
value record is the value's pickle, or ``K`` + the pickle of ``(key, value)`` when the key cannot be
recovered from the LMDB key. Decoding needs no LMDB, so the heap backend restores these records too.
"""
from __future__ import annotations

import pickle
from typing import Any

WRAPPED = b"K"  # value record carrying its key: (key, value). Plain records are a pickle (first byte 0x80).
KG_BYTES = 2  # max_parallelism is at most 32768


def key_group_prefix(key_group: int) -> bytes:
    return key_group.to_bytes(KG_BYTES, "big")


def decode_record(lk: bytes, vb: bytes) -> tuple[Any, Any]:
    """(key, value) of one stored record."""
    if vb[:1] == WRAPPED:
        key, value = pickle.loads(vb[1:])
        return key, value
    return pickle.loads(lk[KG_BYTES:]), pickle.loads(vb)
