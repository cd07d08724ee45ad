"""Maps a transformation's kind to the operator class that runs it."""
from __future__ import annotations

from millstream.engine.graph.transformations import OperatorKind, Transformation
from millstream.engine.runtime.operators.async_wait import AsyncWaitOperator
from millstream.engine.runtime.operators.base import OperatorContext, StreamOperator
from millstream.engine.runtime.operators.basic import FilterOperator, FlatMapOperator, MapOperator, ProcessOperator
from millstream.engine.runtime.operators.co_operators import (
    BroadcastProcessOperator,
    CoFlatMapOperator,
    CoMapOperator,
    CoProcessOperator,
    KeyedBroadcastProcessOperator,
    KeyedCoProcessOperator,
)
from millstream.engine.runtime.operators.keyed import KeyedProcessOperator, ReduceOperator
from millstream.engine.runtime.operators.timestamps import TimestampsAndWatermarksOperator
from millstream.engine.runtime.operators.aligned_window import AlignedWindowOperator, is_aligned
from millstream.engine.runtime.operators.aligned_window_table import StateTableAlignedWindowOperator
from millstream.engine.runtime.state.heap_backend import HeapKeyedStateBackend
from millstream.engine.runtime.operators.window import WindowOperator
from millstream.engine.runtime.operators.sinks import (
    CollectSinkOperator,
    FunctionSinkOperator,
    PrintSinkOperator,
    WriterSinkOperator,
)

_BY_KIND: dict[OperatorKind, type[StreamOperator]] = {
    OperatorKind.MAP: MapOperator,
    OperatorKind.FLAT_MAP: FlatMapOperator,
    OperatorKind.FILTER: FilterOperator,
    OperatorKind.PROCESS: ProcessOperator,
    OperatorKind.REDUCE: ReduceOperator,
    OperatorKind.KEYED_PROCESS: KeyedProcessOperator,
    OperatorKind.TIMESTAMPS: TimestampsAndWatermarksOperator,
    OperatorKind.WINDOW: WindowOperator,
    OperatorKind.CO_MAP: CoMapOperator,
    OperatorKind.CO_FLAT_MAP: CoFlatMapOperator,
    OperatorKind.CO_PROCESS: CoProcessOperator,
    OperatorKind.KEYED_CO_PROCESS: KeyedCoProcessOperator,
    OperatorKind.BROADCAST_PROCESS: BroadcastProcessOperator,
    OperatorKind.KEYED_BROADCAST_PROCESS: KeyedBroadcastProcessOperator,
    OperatorKind.ASYNC_WAIT: AsyncWaitOperator,
}

_SINKS: dict[str, type[StreamOperator]] = {
    "print": PrintSinkOperator,
    "function": FunctionSinkOperator,
    "writer": WriterSinkOperator,
    "collect": CollectSinkOperator,
}


def create_operator(t: Transformation, ctx: OperatorContext) -> StreamOperator:
    params = dict(t.params, node_id=t.id)
    if t.kind is OperatorKind.SINK:
        return _SINKS[t.params["sink"]](t.function, ctx, params)
    if t.kind is OperatorKind.WINDOW and is_aligned(t.params):
        # Accumulators on the heap, by window start; other backends keep them in their own tables.
        on_heap = isinstance(ctx.keyed_backend, HeapKeyedStateBackend)
        return (AlignedWindowOperator if on_heap else StateTableAlignedWindowOperator)(t.function, ctx, params)
    cls = _BY_KIND.get(t.kind)
    if cls is None:
        raise ValueError(f"no runtime operator for {t.kind.value}")
    return cls(t.function, ctx, params)
