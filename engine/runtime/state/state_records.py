"""The record format of the on-disk keyed state backend, shared with snapshots and restores.

An LMDB key is the key group of the state key as two big-endian bytes, then the encoded key: an int
of 64 bits as ``i`` and the int plus 2**63 in eight big-endian bytes, a str as ``s`` and its UTF-8,
any other scalar as its pickle, or a packed canonical form or digest (see ``lmdb_backend``). With the key group first, the records of one
key group are contiguous and sorted, so a snapshot copies raw records grouped by key group without
unpickling anything, and a restore takes the key groups it owns by a byte compare. Ints are stored in
their numeric order because keys often arrive in that order (sequence numbers, ids): their pickle is
little-endian, so consecutive ints landed all over a key group's range of the B-tree, where now they
append to it (inserting 1.5 M increasing ints in batches: 1.1-1.5 against 5.8-6.1 us a put).

A value record is the value's pickle, or ``K`` + the pickle of ``(key, value)`` when the key cannot be
recovered from the LMDB key. Decoding needs no LMDB, so the heap backend restores these records too.

A str is stored as ``s`` and its UTF-8 (version 3): 13-22 bytes shorter than its pickle, and no pickler
call per key. A str too long for an LMDB key keeps the digest of its pickle, decided by the pickle's
length (``digest_source``), as in every version before, so that the same long string has the same key
whichever version wrote it: a delta's deletion of such a key carries nothing to re-encode it from.
A str UTF-8 cannot encode (a lone surrogate) stays a pickle.

Records of older versions (``RECORD_KEYS_FIELD`` in a snapshot's kinds; absent: 1) hold ints (version 1)
and strs (versions 1 and 2) as pickles; they decode as they are, and ``upgrade_keys`` re-encodes them
before they go back into LMDB, where one key must have one entry.
"""
from __future__ import annotations

import pickle
from typing import Any, Iterable, Mapping

WRAPPED = b"K"  # value record carrying its key: (key, value). Plain records are a pickle (first byte 0x80).
KG_BYTES = 2  # max_parallelism is at most 32768
INT_KEY = b"i"  # an encoded key that is an int of 64 bits (pickles start with 0x80; see lmdb_backend)
INT_OFFSET = 1 << 63  # added to an int so that its unsigned big-endian bytes sort as the ints do
STR_KEY = b"s"  # an encoded key that is a str: its UTF-8
RECORD_KEYS_VERSION = 3  # 1: ints and strs as pickles; 2: ints as INT_KEY; 3: strs as STR_KEY too
RECORD_KEYS_FIELD = "_record_keys/version"  # in a snapshot's ``kinds``, never a state name (reserved prefix)
# The opcode after a protocol-5 pickle's frame header (byte 11) when the pickle is of an int of at least
# 256 (smaller ones are b"\x80\x05K" + one byte, unframed): BININT2, BININT, LONG1.
_PICKLED_INT_OPCODES = frozenset(b"MJ\x8a")
# ... and of a str: SHORT_BINUNICODE, BINUNICODE, BINUNICODE8.
_PICKLED_STR_OPCODES = frozenset(b"\x8cX\x8d")
# How much longer than its STR_KEY body a str's pickle can be: protocol, frame, opcode and length,
# memo and stop (2 + 9 + 9 + 1 + 1) less the STR_KEY byte.
STR_PICKLE_SLACK = 21


def key_group_prefix(key_group: int) -> bytes:
    return key_group.to_bytes(KG_BYTES, "big")


def encode_key(key: Any) -> bytes:
    """The encoded key (after the key group) of a str, bytes or int key, or a scalar canonical form."""
    t = type(key)
    if t is str:
        try:
            return STR_KEY + key.encode()
        except UnicodeEncodeError:  # a lone surrogate: its pickle (which starts with 0x80)
            return pickle.dumps(key, 5)
    if t is int and -INT_OFFSET <= key < INT_OFFSET:
        return INT_KEY + (key + INT_OFFSET).to_bytes(8, "big")
    return pickle.dumps(key, 5)


def digest_source(body: bytes) -> bytes:
    """What an encoded key too long for LMDB is measured by and hashed from: a str's pickle (as in
    record keys versions 1 and 2, see the module's docstring), anything else's ``body``."""
    if body[:1] == STR_KEY:
        return pickle.dumps(body[1:].decode(), 5)
    return body


def decode_key(body: bytes) -> Any:
    """The key of an encoded key that is a scalar's (not a packed form or a digest)."""
    tag = body[:1]
    if tag == STR_KEY:
        return body[1:].decode()
    if tag == INT_KEY:
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


def upgrade_keys(rows: Iterable[tuple[bytes, Any]], version: int = 1) -> list[tuple[bytes, Any]]:
    """Rows of records of an older ``version`` with each key re-encoded as this version encodes it:
    pickled ints of 64 bits (version 1) and pickled strs (versions 1 and 2). Values are untouched, and
    so is a digest (a long str's is the same in every version)."""
    out = []
    ints = version < 2
    for lk, vb in rows:
        if lk[KG_BYTES : KG_BYTES + 2] == b"\x80\x05":
            op = lk[KG_BYTES + 2]
            framed = op == 0x95 and len(lk) > KG_BYTES + 11
            if (framed and lk[KG_BYTES + 11] in _PICKLED_STR_OPCODES) or (
                ints and (op == 0x4B or (framed and lk[KG_BYTES + 11] in _PICKLED_INT_OPCODES))
            ):
                key = pickle.loads(lk[KG_BYTES:])
                t = type(key)
                if t is str or (t is int and -INT_OFFSET <= key < INT_OFFSET):
                    lk = lk[:KG_BYTES] + encode_key(key)
        out.append((lk, vb))
    return out
