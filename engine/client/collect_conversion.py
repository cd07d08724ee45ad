"""What ``execute_and_collect`` hands back: each record as the stream's declared type, as in PyFlink.

The data plane's msgpack gives lists back as tuples and bytearrays as bytes. A typed stream's
records are rebuilt by their type (``TypeInformation.coerce``: a list for LIST, a Row with its
field names for ROW_NAMED...). In a stream of Python objects (no declared type) each record that
msgpack would not give back as it is (a list, a bytearray, a set in a tuple...) is pickled just
before the collect sink, inside a msgpack extension of its own, and unpickled here, so every
object comes back exactly as the program made it, as PyFlink's PICKLED_BYTE_ARRAY does; strings,
numbers and flat tuples of them (most results) travel as they are, which keeps collecting cheap. A KeyedStream yields ``Row(f0=key, f1=record)``,
PyFlink's own shape for keyed records (recorded from PyFlink 2.3, pickled fields included).
With ``limit`` the result is a list, as in PyFlink.
"""
from __future__ import annotations

import functools
import itertools
import pickle
from typing import TYPE_CHECKING, Any, Callable

import msgpack

from millstream.engine.common.row import Row
from millstream.engine.common.typeinfo import TypeInformation, is_pickled

if TYPE_CHECKING:
    from millstream.engine.datastream.data_stream import DataStream

PICKLE_OPERATOR_NAME = "Pickle For Collect"
# The extension code of a pickled collected record; the data plane's own codes are small (1-4).
PICKLED_RECORD_EXT = 80

# Types msgpack hands back unchanged (ints beyond 64 bits go through its pickle extension: also exact).
_WIRE_EXACT = frozenset((str, int, float, bool, type(None), bytes))


def pickle_record(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def wire_record(value: Any) -> Any:
    """The record itself if msgpack gives it back unchanged, else its pickle in an extension."""
    t = type(value)
    if t in _WIRE_EXACT:
        return value
    if t is tuple:
        for x in value:
            if type(x) not in _WIRE_EXACT:
                break
        else:
            return value
    return msgpack.ExtType(PICKLED_RECORD_EXT, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def unwire_record(value: Any) -> Any:
    if type(value) is msgpack.ExtType and value.code == PICKLED_RECORD_EXT:
        return pickle.loads(value.data)
    return value


def prepare(stream: "DataStream", key: tuple[Callable[[Any], Any], TypeInformation | None] | None = None):
    """The stream to attach the collect sink to, and the function that decodes each collected record."""
    type_info = stream.get_type()
    pickled = is_pickled(type_info)
    # The pickling map runs at its input's parallelism, so it chains to it: records are pickled
    # before any channel could turn their lists into tuples, and their order is kept (limit=).
    source = (
        stream.map(wire_record).name(PICKLE_OPERATOR_NAME).set_parallelism(stream.get_parallelism())
        if pickled
        else stream
    )
    if key is not None:
        return source, keyed_decoder(key[0], key[1], None if pickled else type_info)
    return source, (unwire_record if pickled else functools.partial(type_info.coerce, collected=True))


def keyed_decoder(
    selector: Callable[[Any], Any], key_type: TypeInformation | None, value_type: TypeInformation | None
) -> Callable[[Any], Row]:
    """PyFlink's keyed records: ``Row(f0=key, f1=record)``. A field of no declared type (the key
    without ``key_type``, the record of an untyped stream) comes back as PyFlink leaves it: its
    pickle, in a bytearray."""

    def keyed(raw: Any) -> Row:
        value = unwire_record(raw) if value_type is None else value_type.coerce(raw, True)
        key = selector(value)
        row = Row(
            bytearray(pickle_record(key)) if is_pickled(key_type) else key_type.coerce(key, True),  # type: ignore[union-attr]
            bytearray(pickle_record(value)) if value_type is None else value,
        )
        row.set_field_names(["f0", "f1"])
        return row

    return keyed


class ConvertedIterator:
    """The collect iterator with each record decoded; closes (and so cancels the job) like it."""

    def __init__(self, results: Any, decode: Callable[[Any], Any]) -> None:
        self._results = results
        self._decode = decode

    def __iter__(self) -> "ConvertedIterator":
        return self

    def __next__(self) -> Any:
        return self._decode(next(self._results))

    def next(self) -> Any:
        return self.__next__()

    def close(self) -> None:
        self._results.close()

    def __enter__(self) -> "ConvertedIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def converted(results: Any, decode: Callable[[Any], Any], limit: int | None) -> Any:
    """Iterator of decoded records; with ``limit``, the list of the first ``limit`` records (in order)."""
    if isinstance(results, list):  # the environment already took the first ``limit`` records
        return [decode(v) for v in results]
    it = ConvertedIterator(results, decode)
    if limit is None:
        return it
    try:
        return list(itertools.islice(it, limit))
    finally:
        it.close()
