"""Buffer encoding: msgpack by default, with a pluggable serializer.

A buffer is ``(kind, a, b)``. Records travel as ``(RECORDS, values, timestamps)``;
events travel in-band as their own buffers so they stay in order with records.
Arrays decode as tuples (the common record shape in PyFlink programs), except in a buffer whose
records are lists, which is packed with exact types, and a buffer whose first or last record holds
a list or a bytearray (in tuples, lists or dicts, down to a few levels of nesting), which is pickled
whole when it holds only built-in types (else packed with exact types), so such records arrive as
PyFlink's pickled records do; ``Row`` keeps its field names. An instance of a plain class defined by the job's user code (a dataclass
or class in the program) travels as its class name and its ``__dict__``, whose lists and tuples
keep their types; the receiver makes it from the class the job's loader registered under that
name (engine/runtime/user_code_class_loader.py), unpickling nothing. Any other Python object falls
back to pickle.
"""
from __future__ import annotations

import datetime
import decimal
import itertools
import operator
import pickle
from typing import Any, Protocol

import msgpack

from millstream.engine.common.row import Row, make_row
from millstream.engine.runtime.user_code_class_loader import plain_class_name, resolve_class

RECORDS = 0
WATERMARK = 1
BARRIER = 2
END_OF_PARTITION = 3
STATUS = 4  # watermark status: True idle, False active
LATENCY_MARKER = 5  # [marked time ms, source operator id, source subtask] (engine/runtime/latency_markers.py)

_EXT_ROW = 1
_EXT_PICKLE = 2
_EXT_SET = 3
_EXT_FROZENSET = 4  # its own code: a frozenset must come back hashable (it may be a key)
_EXT_OBJECT = 5  # [class name, __dict__] of a plain user class instance, packed exactly (_exact)
_EXT_TUPLE = 6  # a tuple inside an object's state, where arrays decode as lists
_EXT_OBJECTS = 7  # a whole buffer of one plain user class: [class name, [__dict__, ...]]
_EXT_EXACT = 8  # a buffer of list records, packed exactly (_exact): lists stay lists, tuples tuples
_EXT_PICKLED = 9  # a buffer of built-in records msgpack would change (a list in a tuple...), pickled whole

_state_of = operator.attrgetter("__dict__")


class BufferSerializer(Protocol):
    def encode(self, kind: int, a: Any, b: Any = None) -> bytes: ...

    def decode(self, data: bytes) -> tuple[int, Any, Any]: ...


def _default(obj: Any) -> Any:
    name = plain_class_name(type(obj))
    if name is not None:
        # A list, not a tuple: under strict_types a tuple is an extension of its own.
        packed = msgpack.packb([name, obj.__dict__], default=_exact, use_bin_type=True, strict_types=True)
        return tuple.__new__(msgpack.ExtType, (_EXT_OBJECT, packed))  # skips ExtType's checks: a hot path
    if isinstance(obj, Row):
        packed = (obj._names(), tuple(obj), obj.get_row_kind().value)
        return msgpack.ExtType(_EXT_ROW, msgpack.packb(packed, default=_default, use_bin_type=True))
    if isinstance(obj, frozenset):
        return msgpack.ExtType(_EXT_FROZENSET, msgpack.packb(list(obj), default=_default, use_bin_type=True))
    if isinstance(obj, set):
        return msgpack.ExtType(_EXT_SET, msgpack.packb(list(obj), default=_default, use_bin_type=True))
    return msgpack.ExtType(_EXT_PICKLE, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _exact(obj: Any) -> Any:
    """Inside an object's state, types stay exact: a tuple is not a list, a dict or int subclass
    (OrderedDict, IntEnum...) is not its base, as pickle would keep them."""
    if type(obj) is tuple:
        return msgpack.ExtType(_EXT_TUPLE, msgpack.packb(list(obj), default=_exact, use_bin_type=True, strict_types=True))
    return _default(obj)


def _objects_batch(values: list[Any]) -> Any:
    """Records all of one plain user class (the usual case) go as one extension: the class name
    once, then each ``__dict__``, which msgpack packs without calling back into Python."""
    cls = type(values[0])
    name = plain_class_name(cls)
    if name is None or (len(values) > 1 and len(set(map(type, values))) != 1):
        return None
    packed = msgpack.packb([name, list(map(_state_of, values))], default=_exact, use_bin_type=True, strict_types=True)
    return msgpack.ExtType(_EXT_OBJECTS, packed)


def _new_objects(data: bytes) -> tuple[Any, ...]:
    name, states = msgpack.unpackb(data, ext_hook=_ext_hook, use_list=True, strict_map_key=False)
    cls, new = resolve_class(name), object.__new__
    out = []
    append = out.append
    if cls.__setattr__ is not object.__setattr__:
        # A frozen dataclass (or any class guarding its attributes) refuses `obj.__dict__ = ...`;
        # object's own __setattr__ sets the state as unpickling would.
        set_state = object.__setattr__
        for state in states:
            obj = new(cls)
            set_state(obj, "__dict__", state)
            append(obj)
        return tuple(out)
    for state in states:
        obj = new(cls)
        obj.__dict__ = state
        append(obj)
    return tuple(out)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_OBJECTS:
        return _new_objects(data)
    if code == _EXT_EXACT:
        return tuple(msgpack.unpackb(data, ext_hook=_ext_hook, use_list=True, strict_map_key=False))
    if code == _EXT_PICKLED:
        return tuple(pickle.loads(data))
    if code == _EXT_OBJECT:
        name, state = msgpack.unpackb(data, ext_hook=_ext_hook, use_list=True, strict_map_key=False)
        cls = resolve_class(name)
        obj = object.__new__(cls)
        obj.__dict__.update(state)
        return obj
    if code == _EXT_TUPLE:
        return tuple(msgpack.unpackb(data, ext_hook=_ext_hook, use_list=True, strict_map_key=False))
    if code == _EXT_ROW:
        return make_row(*msgpack.unpackb(data, ext_hook=_ext_hook, use_list=False, strict_map_key=False))
    if code == _EXT_SET:
        return set(msgpack.unpackb(data, ext_hook=_ext_hook, use_list=False, strict_map_key=False))
    if code == _EXT_FROZENSET:
        return frozenset(msgpack.unpackb(data, ext_hook=_ext_hook, use_list=False, strict_map_key=False))
    if code == _EXT_PICKLE:
        return pickle.loads(data)
    return msgpack.ExtType(code, data)


_NATIVE = frozenset({tuple, list, str, int, float, bytes, dict, bool, type(None)})
# Types msgpack gives back as they were, anywhere in a record.
_KEPT = frozenset({str, int, float, bool, type(None), bytes})
# What msgpack gives back as something else inside a record: a list (as a tuple), a bytearray (as
# bytes); and the containers they may sit in.
_CHANGED = frozenset({list, bytearray})
_CONTAINERS = frozenset({tuple, list, dict})
# Types whose pickle names only the standard library, so a TaskManager can always load it (a class
# of the job's program could not be found by pickle there).
_PICKLE_SAFE = _KEPT | _CHANGED | _CONTAINERS | frozenset({
    set, frozenset, decimal.Decimal, datetime.date, datetime.time, datetime.datetime, datetime.timedelta,
})
_NESTING_CHECKED = 4  # levels of nesting looked into; deeper lists come back as tuples


def _flatten(level: list[Any]) -> list[Any]:
    """The elements of the containers in ``level`` (dicts give their keys and values)."""
    t, d = tuple, dict
    seqs = [x for x in level if type(x) is t or type(x) is list]
    maps = [x for x in level if type(x) is d]
    out = list(itertools.chain.from_iterable(seqs))
    for m in maps:
        out += m.keys()
        out += m.values()
    return out


def _changed_buffer(values: Any) -> Any:
    """An exact encoding of records msgpack would change (a list or a bytearray in them), or None."""
    level, seen, deeper = values, set(), False
    for depth in range(_NESTING_CHECKED):
        types = set(map(type, level))
        seen |= types
        if not types & _CONTAINERS:
            break
        if depth == _NESTING_CHECKED - 1:
            deeper = True  # not looked into: maybe a class pickle could not find on a TaskManager
            break
        level = _flatten(level)
    if not seen & _CHANGED:
        return None
    if seen <= _PICKLE_SAFE and not deeper:
        return msgpack.ExtType(_EXT_PICKLED, pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL))
    return msgpack.ExtType(_EXT_EXACT, msgpack.packb(list(values), default=_exact, use_bin_type=True, strict_types=True))


class MsgpackSerializer:
    """The default serializer."""

    def __init__(self) -> None:
        self._packer = msgpack.Packer(default=_default, use_bin_type=True, autoreset=True)

    def encode(self, kind: int, a: Any, b: Any = None) -> bytes:
        if kind == RECORDS and a:
            first = type(a[0])
            if first is list:
                # Arrays decode as tuples, so a buffer of list records (judged by its first: one
                # check per buffer) is packed with exact types, as pickle would keep them.
                a = msgpack.ExtType(_EXT_EXACT, msgpack.packb(list(a), default=_exact, use_bin_type=True, strict_types=True))
            elif first is tuple or first is bytearray or first is dict:
                # Records of one stream share a shape: only when its first or last record holds
                # something msgpack would change is the whole buffer looked into (a full look costs
                # more than packing it).
                if _changed_buffer((a[0], a[-1])) is not None:
                    exact = _changed_buffer(a)
                    if exact is not None:
                        a = exact
            elif first not in _NATIVE:
                batch = _objects_batch(a)
                if batch is not None:
                    a = batch
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
