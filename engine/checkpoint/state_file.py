"""The layout of a key-grouped state file: a small head, then one part per key group, and the index
that says where each part is (Flink's KeyGroupsStateHandle with its key-group offsets).

A restore at a new parallelism reads the head (the operator's non-keyed state and the index) and
then only the byte ranges of the key groups its subtask owns, never the whole file.

    file  = MAGIC | head length (8 bytes, big-endian) | head | part | part | ...
    head  = index length (4 bytes) | index (JSON [[key group, offset, length], ...]) | payload

Offsets count from the first byte after the head. Pure byte arithmetic: checkpoint storage
(``storage``) seals the head and each part separately when it writes the file, and checks only what
it reads; what a head's payload and a part hold is the task state manager's business. A file that
does not start with ``MAGIC`` is the older single-blob format (a pickle, or a sealed pickle).
"""
from __future__ import annotations

import json
from typing import Iterable

MAGIC = b"MSKG"  # neither a pickle (0x80), a sealed envelope (0xA1) nor msgpack's map/array
_LEN = 8
PREFIX_BYTES = len(MAGIC) + _LEN

Index = list[tuple[int, int, int]]  # [(key group, offset, length)]


def is_key_grouped(data: bytes) -> bool:
    return data[: len(MAGIC)] == MAGIC


def encode_head(payload: bytes, index: Index) -> bytes:
    ix = json.dumps([list(i) for i in index], separators=(",", ":")).encode()
    return len(ix).to_bytes(4, "big") + ix + payload


def decode_head(head: bytes) -> tuple[bytes, Index]:
    """(payload, index) of a head; raises ValueError if it is not one."""
    n = int.from_bytes(head[:4], "big")
    if len(head) < 4 + n:
        raise ValueError("the state file's head is shorter than its index")
    raw = json.loads(head[4 : 4 + n])
    index = [(int(kg), int(off), int(length)) for kg, off, length in raw]
    return head[4 + n :], index


def pack(head: bytes, parts: Iterable[bytes]) -> bytes:
    """A whole file from an (encoded) head and the parts in the order its index lists them."""
    return MAGIC + len(head).to_bytes(_LEN, "big") + head + b"".join(parts)


def prefix(head: bytes) -> bytes:
    """The bytes before an (encoded) head: a file is ``prefix(head) + head`` and then its parts."""
    return MAGIC + len(head).to_bytes(_LEN, "big")


def head_length(prefix: bytes) -> int:
    """The head's length, from the file's first ``PREFIX_BYTES`` bytes."""
    if len(prefix) < PREFIX_BYTES or not is_key_grouped(prefix):
        raise ValueError("not a key-grouped state file")
    return int.from_bytes(prefix[len(MAGIC) : PREFIX_BYTES], "big")


def build(payload: bytes, parts: list[tuple[int, bytes]]) -> bytes:
    """An unsealed file holding ``payload`` and ``parts`` ([(key group, bytes)], one per key group)."""
    index: Index = []
    offset = 0
    for kg, data in parts:
        index.append((kg, offset, len(data)))
        offset += len(data)
    return pack(encode_head(payload, index), (data for _, data in parts))


def split(data: bytes) -> tuple[bytes, Index, memoryview]:
    """(head payload, index, the bytes after the head) of a whole file."""
    n = head_length(data[:PREFIX_BYTES])
    payload, index = decode_head(data[PREFIX_BYTES : PREFIX_BYTES + n])
    return payload, index, memoryview(data)[PREFIX_BYTES + n :]
