"""Event timestamps on Spark: which RDDs carry them, and the Timestamps/Watermarks operator.

Natively every record batch may carry timestamps. On Spark an RDD holds
``(value, timestamp)`` pairs only between a producer of timestamps and the
consumers that read them; everywhere else it holds bare values, so jobs
without event time pay nothing. ``plan_timestamps`` decides this from the
StreamGraph alone; the translator then strips or adds timestamps on edges.
Watermarks have no counterpart: in BATCH all data is on time, as in Flink.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from millstream.engine.common.watermark_strategy import WatermarkStrategy
from millstream.engine.graph.stream_graph import StreamGraph
from millstream.engine.graph.transformations import OperatorKind
from millstream.engine.runtime.watermarks import MIN_WATERMARK, TimestampExtractor

PartitionFn = Callable[[int, Iterator[Any]], Iterator[Any]]
CHUNK = 1024  # records per call to the extractor, as a native batch

#: operators whose output keeps each input record's timestamp
_PROPAGATE = frozenset(
    {
        OperatorKind.MAP,
        OperatorKind.FLAT_MAP,
        OperatorKind.FILTER,
        OperatorKind.PROCESS,
        OperatorKind.KEYED_PROCESS,
        OperatorKind.CO_MAP,
        OperatorKind.CO_FLAT_MAP,
    }
)
#: propagating operators that never look at timestamps themselves
_PASS_ON = frozenset(
    {OperatorKind.MAP, OperatorKind.FLAT_MAP, OperatorKind.FILTER, OperatorKind.CO_MAP, OperatorKind.CO_FLAT_MAP}
)


@dataclass(frozen=True)
class Stamping:
    """Whether an operator's input and output RDDs hold ``(value, timestamp)`` pairs."""

    input: bool = False
    output: bool = False


NO_STAMPS = Stamping()


def _reads_timestamps(kind: OperatorKind, params: dict[str, Any]) -> bool:
    """Does the operator itself look at its input's timestamps?"""
    if kind in (OperatorKind.TIMESTAMPS, OperatorKind.PROCESS, OperatorKind.KEYED_PROCESS):
        return True
    if kind is OperatorKind.WINDOW:
        return bool(params["assigner"].is_event_time)
    return kind is OperatorKind.SINK and params.get("sink") == "function"  # SinkFunction's context.timestamp()


def plan_timestamps(sg: StreamGraph) -> dict[int, Stamping]:
    """Per stream node: does its input RDD, and its output RDD, carry timestamps?

    A node's output carries them when it has them (natively its records would
    be stamped) and some consumer reads them, directly or through operators
    that pass them on.
    """
    ids = sorted(sg.nodes)
    params = {n: sg.transformations[n].params for n in ids}
    kind = {n: sg.nodes[n].kind for n in ids}
    inputs = {n: [e.source for e in sg.in_edges(n)] for n in ids}
    has: dict[int, bool] = {}
    for n in ids:  # node ids follow program order: inputs come first
        k, upstream = kind[n], any(has[i] for i in inputs[n])
        if k is OperatorKind.TIMESTAMPS:
            has[n] = params[n]["watermark_strategy"].extract_timestamp_fn() is not None or upstream
        elif k in (OperatorKind.WINDOW, OperatorKind.KEYED_PROCESS):
            has[n] = True  # window results carry the window's end; event-time timers their time
        else:
            has[n] = k in _PROPAGATE and upstream
    needs: dict[int, bool] = {}
    for n in reversed(ids):
        consumers = [e.target for e in sg.out_edges(n)]
        needs[n] = any(
            _reads_timestamps(kind[c], params[c]) or (kind[c] in _PROPAGATE and needs[c]) for c in consumers
        )
    plan: dict[int, Stamping] = {}
    for n in ids:
        output = has[n] and needs[n]
        if kind[n] in _PASS_ON:
            stamped_input = output  # they only pass timestamps on
        elif kind[n] is OperatorKind.WINDOW and params[n]["assigner"].is_event_time:
            stamped_input = True  # unstamped records must fail as natively, not vanish
        else:
            stamped_input = _reads_timestamps(kind[n], params[n]) and any(has[i] for i in inputs[n])
        plan[n] = Stamping(stamped_input, output)
    return plan


def value_of(pair: tuple[Any, int | None]) -> Any:
    return pair[0]


def unstamped(value: Any) -> tuple[Any, None]:
    return value, None


def timestamps_partition(strategy: WatermarkStrategy, operator_name: str, stamping: Stamping) -> PartitionFn:
    """The Timestamps/Watermarks operator: the strategy's assigner, validated as natively."""

    def run(index: int, it: Iterator[Any]) -> Iterator[Any]:
        fn = strategy.extract_timestamp_fn()
        extractor = TimestampExtractor(fn, operator_name) if fn is not None else None
        chunk: list[Any] = []
        for record in it:
            chunk.append(record)
            if len(chunk) >= CHUNK:
                yield from _stamp(chunk, extractor, strategy, operator_name, stamping)
                chunk = []
        if chunk:
            yield from _stamp(chunk, extractor, strategy, operator_name, stamping)

    return run


def _stamp(
    chunk: list[Any],
    extractor: TimestampExtractor | None,
    strategy: WatermarkStrategy,
    operator_name: str,
    stamping: Stamping,
) -> list[Any]:
    if stamping.input:
        values = [v for v, _ in chunk]
        previous: list[Any] | None = [MIN_WATERMARK if t is None else t for _, t in chunk]
    else:
        values, previous = chunk, None
    if extractor is not None:
        stamps: list[Any] | None = extractor.extract(values, previous)
    elif previous is not None:
        stamps = [t for _, t in chunk]
    elif strategy.kind in ("monotonous", "bounded"):
        raise TypeError(
            f"'{operator_name}': records carry no timestamps; "
            "give the WatermarkStrategy a timestamp assigner (with_timestamp_assigner)"
        )
    else:
        stamps = None
    if not stamping.output:
        return values
    return list(zip(values, stamps)) if stamps is not None else [(v, None) for v in values]
