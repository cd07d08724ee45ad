"""The msgpack buffer encoding keeps what PyFlink's pickled records keep: lists inside tuple records
stay lists and bytearrays stay bytearrays (test_execute_and_collect of Apache Flink's own tests
collects such records after an exchange), while a buffer of plain tuples is packed as before."""
from __future__ import annotations

import datetime
import decimal

import msgpack

from millstream.engine.runtime.io.serialization import RECORDS, MsgpackSerializer, _default


def _round_trip(records: list) -> list:
    s = MsgpackSerializer()
    kind, values, _ = s.decode(s.encode(RECORDS, records))
    assert kind == RECORDS
    return list(values)


def test_lists_and_bytearrays_inside_records_come_back_as_they_were() -> None:
    cases = [
        [(1, None, bytearray(b"flink"), [1, 2, 3], [["a", "b"], ["c"]], decimal.Decimal("1.05"),
          datetime.date(2014, 9, 13))] * 2,
        [("k", {"a": [1, 2]}), ("j", {"b": [3]})],
        [(1, ((2, [3]),))],
        [bytearray(b"ab"), bytearray(b"c")],
        [(1, "plain"), (2, [4])],  # only the last record holds a list
    ]
    for records in cases:
        got = _round_trip(records)
        assert got == records
        assert [repr(r) for r in got] == [repr(r) for r in records]  # same types, not only equal


def test_a_buffer_of_plain_tuples_is_packed_as_plain_msgpack() -> None:
    records = [("w%d" % i, i, 1.5, None, b"x") for i in range(100)]
    plain = msgpack.Packer(default=_default, use_bin_type=True).pack((RECORDS, records, None))
    assert MsgpackSerializer().encode(RECORDS, records) == plain
    assert _round_trip(records) == records
