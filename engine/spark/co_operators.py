"""Stateless two-input operators on Spark: CoMap and CoFlatMap over a union of tagged inputs.

The translator tags every record with the index of the input it came by,
``(input_index, record)``, and unions both inputs; each partition then calls
``map1``/``map2`` (or ``flat_map1``/``flat_map2``) by tag, as the native
operator does per input. Nothing here imports PySpark.
"""
from __future__ import annotations

from typing import Any, Iterator

from millstream.engine.datastream.functions import CoFlatMapFunction, CoMapFunction
from millstream.engine.spark.partitions import PartitionFn, TaskInfo, _close, _open, _results

TaggedRecord = tuple[int, Any]  # (input index, record or (record, timestamp))


def co_map_partition(fn: CoMapFunction, info: TaskInfo, stamped: bool = False) -> PartitionFn:
    def run(index: int, it: Iterator[TaggedRecord]) -> Iterator[Any]:
        _open(fn, info, index)
        calls = (fn.map1, fn.map2)
        try:
            for input_index, record in it:
                call = calls[input_index]
                if stamped:
                    yield call(record[0]), record[1]
                else:
                    yield call(record)
        finally:
            _close(fn)

    return run


def co_flat_map_partition(fn: CoFlatMapFunction, info: TaskInfo, stamped: bool = False) -> PartitionFn:
    def run(index: int, it: Iterator[TaggedRecord]) -> Iterator[Any]:
        _open(fn, info, index)
        calls = (fn.flat_map1, fn.flat_map2)
        try:
            for input_index, record in it:
                v, ts = record if stamped else (record, None)
                out = _results(calls[input_index](v))  # the native rules, side-output pairs dropped
                if stamped:
                    for o in out:
                        yield o, ts
                else:
                    yield from out
        finally:
            _close(fn)

    return run
