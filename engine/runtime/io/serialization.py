"""Buffer encoding: msgpack by default, with a pluggable serializer.

A buffer is ``(kind, a, b)``. Records travel as ``(RECORDS, values, timestamps)``;
events travel in-band as their own buffers so they stay in order with records.
Arrays decode as tuples (the common record shape in PyFlink programs); ``Row``
keeps its field names; any other Python object falls back to pickle.
"""
from __future__ import annotations

import pickle
from typing import Any, Protocol

import msgpack

from engine.common.row import Row, make_row

RECORDS = 0
WATERMARK = 1
BARRIER = 2
END_OF_PARTITION = 3
STATUS = 4  # watermark status: True idle, False active

_EXT_ROW = 1
_EXT_PICKLE = 2
_EXT_SET = 3
_EXT_FROZENSET = 4  # its own code: a frozenset must come back hashable (it may be a key)


class BufferSerializer(Protocol):
    def encode(self, kind: int, a: Any, b: Any = None) -> bytes: ...

    def decode(self, data: bytes) -> tuple[int, Any, Any]: ...


def _default(obj: Any) -> Any:
    if isinstance(obj, Row):
        packed = (obj._names(), tuple(obj), obj.get_row_kind().value)
        return msgpack.ExtType(_EXT_ROW, msgpack.packb(packed, default=_default, use_bin_type=True))
    if isinstance(obj, frozenset):
        return msgpack.ExtType(_EXT_FROZENSET, msgpack.packb(list(obj), default=_default, use_bin_type=True))
    if isinstance(obj, set):
        return msgpack.ExtType(_EXT_SET, msgpack.packb(list(obj), default=_default, use_bin_type=True))
    return msgpack.ExtType(_EXT_PICKLE, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_ROW:
        return make_row(*msgpack.unpackb(data, ext_hook=_ext_hook, use_list=False, strict_map_key=False))
    if code == _EXT_SET:
        return set(msgpack.unpackb(data, ext_hook=_ext_hook, use_list=False, strict_map_key=False))
    if code == _EXT_FROZENSET:
        return frozenset(msgpack.unpackb(data, ext_hook=_ext_hook, use_list=False, strict_map_key=False))
    if code == _EXT_PICKLE:
        return pickle.loads(data)
    return msgpack.ExtType(code, data)


class MsgpackSerializer:
    """The default serializer."""

    def __init__(self) -> None:
        self._packer = msgpack.Packer(default=_default, use_bin_type=True, autoreset=True)

    def encode(self, kind: int, a: Any, b: Any = None) -> bytes:
        return self._packer.pack((kind, a, b))

    def decode(self, data: bytes) -> tuple[int, Any, Any]:
        return msgpack.unpackb(data, ext_hook=_ext_hook, use_list=False, strict_map_key=False, raw=False)


class PickleSerializer:
    """Exact Python types at some cost in speed; chosen per job with ``pipeline.serializer=pickle``."""

    def encode(self, kind: int, a: Any, b: Any = None) -> bytes:
        return pickle.dumps((kind, a, b), protocol=pickle.HIGHEST_PROTOCOL)

    def decode(self, data: bytes) -> tuple[int, Any, Any]:
        return pickle.loads(data)


def create_serializer(name: str = "msgpack") -> BufferSerializer:
    if name == "msgpack":
        return MsgpackSerializer()
    if name == "pickle":
        return PickleSerializer()
    raise ValueError(f"unknown serializer '{name}' (choose msgpack or pickle)")
