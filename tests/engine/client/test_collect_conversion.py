"""Decoding collected records: exact untyped records, keyed rows, limit as a list."""
import pickle

import msgpack

from millstream.engine.client.collect_conversion import (
    PICKLED_RECORD_EXT,
    converted,
    keyed_decoder,
    unwire_record,
    wire_record,
)
from millstream.engine.common.row import Row
from millstream.engine.common.typeinfo import Types
from millstream.engine.runtime.io.serialization import MsgpackSerializer


def test_records_msgpack_would_change_are_pickled_others_travel_as_they_are():
    s = MsgpackSerializer()
    values = [1, "a", None, 1.5, b"x", ("a", 1), [1, 2], bytearray(b"x"), ("a", [1]), {1, 2}, {"a": [1]}, Row(1)]
    wired = [wire_record(v) for v in values]
    assert wired[:6] == values[:6]  # no pickle for scalars and flat tuples of them
    assert all(isinstance(w, msgpack.ExtType) and w.code == PICKLED_RECORD_EXT for w in wired[6:])
    _, back, _ = s.decode(s.encode(0, wired))
    out = [unwire_record(v) for v in back]
    assert out == values and [type(v) for v in out] == [type(v) for v in values]


def test_keyed_decoder_builds_pyflinks_rows():
    typed = keyed_decoder(lambda v: v[0], Types.STRING(), Types.TUPLE([Types.STRING(), Types.LIST(Types.INT())]))
    row = typed(("a", (1, 2)))
    assert row == Row(f0="a", f1=("a", [1, 2])) and row._fields == ["f0", "f1"]
    untyped = keyed_decoder(lambda v: v[0], None, None)
    row = untyped(wire_record(("a", [1])))
    # PyFlink leaves fields without a declared type pickled, in bytearrays.
    assert pickle.loads(row.f0) == "a" and pickle.loads(row.f1) == ("a", [1]) and type(row.f0) is bytearray


class _Results:
    def __init__(self, values):
        self.it = iter(values)
        self.closed = False

    def __next__(self):
        return next(self.it)

    def close(self):
        self.closed = True


def test_limit_gives_the_first_records_in_order_and_closes():
    results = _Results(range(100))
    assert converted(results, lambda v: v * 2, 3) == [0, 2, 4] and results.closed
    it = converted(_Results(range(3)), str, None)
    with it:
        assert list(it) == ["0", "1", "2"]
    assert converted([1, 2], str, 2) == ["1", "2"]  # the environment already took the first records
