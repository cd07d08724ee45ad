"""The record format of the on-disk keyed state backend, shared with snapshots and restores.

An LMDB key is the key group of the state key as two big-endian bytes, then the encoded key: an int
of 64 bits as ``i`` and the int plus 2**63 in eight big-endian bytes, anything else as its pickle, or
a packed canonical form or digest (see ``lmdb_backend``). With the key group first, the records of one
key group are contiguous and sorted, so a snapshot copies raw records grouped by key group without
unpickling anything, and a restore takes the key groups it owns by a byte compare. Ints are stored in
their numeric order because keys often arrive in that order (sequence numbers, ids): their pickle is
little-endian, so consecutive ints landed all over a key group's range of the B-tree, where now they
append to it (inserting 1.5 M increasing ints in batches: 1.1-1.5 against 5.8-6.1 us a put).

A value record is the value's pickle, or ``K`` + the pickle of ``(key, value)`` when the key cannot be
recovered from the LMDB key. Decoding needs no LMDB, so the heap backend restores these records too.

Records written before ints had their own encoding (``RECORD_KEYS_VERSION`` 1, recorded in a
snapshot's kinds as ``RECORD_KEYS_FIELD``; absent: 1) hold ints as pickles; they decode as they are, and
``upgrade_keys`` re-encodes them before they go back into LMDB, where one int must have one key.
"""
from __future__ import annotations

import pickle
from typing import Any, Iterable, Mapping

WRAPPED = b"K"  # value record carrying its key: (key, value). Plain records are a pickle (first byte 0x80).
KG_BYTES = 2  # max_parallelism is at most 32768
INT_KEY = b"i"  # an encoded key that is an int of 64 bits (pickles start with 0x80; see lmdb_backend)
INT_OFFSET = 1 << 63  # added to an int so that its unsigned big-endian bytes sort as the ints do
RECORD_KEYS_VERSION = 2  # 1: ints as pickles; 2: ints as INT_KEY
RECORD_KEYS_FIELD = "_record_keys/version"  # in a snapshot's ``kinds``, never a state name (reserved prefix)
# The opcode after a protocol-5 pickle's frame header (byte 11) when the pickle is of an int of at least
# 256 (smaller ones are b"\x80\x05K" + one byte, unframed): BININT2, BININT, LONG1.
_PICKLED_INT_OPCODES = frozenset(b"MJ\x8a")


def key_group_prefix(key_group: int) -> bytes:
    return key_group.to_bytes(KG_BYTES, "big")


def encode_key(key: Any) -> bytes:
    """The encoded key (after the key group) of a str, bytes or int key, or a scalar canonical form."""
    if type(key) is int and -INT_OFFSET <= key < INT_OFFSET:
        return INT_KEY + (key + INT_OFFSET).to_bytes(8, "big")
    return pickle.dumps(key, 5)


def decode_key(body: bytes) -> Any:
    """The key of an encoded key that is a scalar's (not a packed form or a digest)."""
    if body[:1] == INT_KEY:
        return int.from_bytes(body[1:], "big") - INT_OFFSET
    return pickle.loads(body)


def decode_record(lk: bytes, vb: bytes) -> tuple[Any, Any]:
    """(key, value) of one stored record, of either version of the key encoding."""
    if vb[:1] == WRAPPED:
        key, value = pickle.loads(vb[1:])
        return key, value
    return decode_key(lk[KG_BYTES:]), pickle.loads(vb)


def record_keys_of(kinds: Mapping[str, Any] | None) -> int:
    """The version of the record keys a snapshot with these ``kinds`` holds."""
    return int((kinds or {}).get(RECORD_KEYS_FIELD, 1))


def upgrade_keys(rows: Iterable[tuple[bytes, Any]]) -> list[tuple[bytes, Any]]:
    """Rows of version-1 records with each int key re-encoded as ``INT_KEY`` (values untouched)."""
    out = []
    for lk, vb in rows:
        if lk[KG_BYTES : KG_BYTES + 2] == b"\x80\x05" and (
            lk[KG_BYTES + 2] == 0x4B or (lk[KG_BYTES + 2] == 0x95 and len(lk) > KG_BYTES + 11 and lk[KG_BYTES + 11] in _PICKLED_INT_OPCODES)
        ):
            key = pickle.loads(lk[KG_BYTES:])
            if type(key) is int and -INT_OFFSET <= key < INT_OFFSET:
                lk = lk[:KG_BYTES] + encode_key(key)
        out.append((lk, vb))
    return out
