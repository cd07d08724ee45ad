"""Two-input streams: ``connect`` (ConnectedStreams) and broadcast state (BroadcastConnectedStream)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from millstream.engine.datastream.functions import (
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeySelector,
)
from millstream.engine.datastream.state import MapStateDescriptor
from millstream.engine.graph.transformations import OperatorKind

if TYPE_CHECKING:
    from millstream.engine.datastream.data_stream import DataStream


class UnsupportedOperationException(Exception):
    """What Flink raises (java.lang.UnsupportedOperationException) for an operation it refuses."""


def _java_type(key_type: Any) -> str:
    return "PickledByteArrayTypeInfo" if key_type is None else repr(key_type)


def _selector(k: Any) -> Any:
    return k.get_key if isinstance(k, KeySelector) else k


class ConnectedStreams:
    def __init__(self, first: "DataStream", second: "DataStream") -> None:
        self.first = first
        self.second = second

    def _op(self, kind: OperatorKind, name: str, fn: Any, output_type: Any = None) -> "DataStream":
        from millstream.engine.datastream.data_stream import DataStream, KeyedStream

        if isinstance(self.first, KeyedStream) and isinstance(self.second, KeyedStream):
            # As Flink's ConnectedStreams.transform: the two inputs must be keyed alike (PyFlink's key
            # is a Row of the declared key type; an undeclared one is a pickled byte array).
            k1, k2 = getattr(self.first, "_key_type", None), getattr(self.second, "_key_type", None)
            if k1 != k2:
                raise UnsupportedOperationException(
                    f"Key types if input KeyedStreams don't match: Row(f0: {_java_type(k1)}) and Row(f0: {_java_type(k2)})."
                )
        env = self.first._env
        tid = env._add(kind, name, (self.first._id, self.second._id), function=fn, output_type=output_type)
        return DataStream(env, tid)

    def key_by(self, key_selector1: Any, key_selector2: Any, key_type: Any = None) -> "ConnectedStreams":
        return ConnectedStreams(
            self.first.key_by(_selector(key_selector1), key_type), self.second.key_by(_selector(key_selector2), key_type)
        )

    def map(self, func: CoMapFunction, output_type: Any = None) -> "DataStream":
        if not isinstance(func, CoMapFunction):
            raise TypeError(f"map on connected streams expects a CoMapFunction, got {type(func).__name__}")
        return self._op(OperatorKind.CO_MAP, "Co-Map", func, output_type)

    def flat_map(self, func: CoFlatMapFunction, output_type: Any = None) -> "DataStream":
        if not isinstance(func, CoFlatMapFunction):
            raise TypeError(f"flat_map on connected streams expects a CoFlatMapFunction, got {type(func).__name__}")
        return self._op(OperatorKind.CO_FLAT_MAP, "Co-Flat Map", func, output_type)

    def process(self, func: Any, output_type: Any = None) -> "DataStream":
        from millstream.engine.datastream.data_stream import KeyedStream

        keyed = isinstance(self.first, KeyedStream) and isinstance(self.second, KeyedStream)
        if isinstance(func, KeyedCoProcessFunction):
            if not keyed:
                raise TypeError("a KeyedCoProcessFunction needs both inputs keyed: connect(...).key_by(k1, k2)")
            return self._op(OperatorKind.KEYED_CO_PROCESS, "KeyedCoProcess", func, output_type)
        if isinstance(func, CoProcessFunction):
            return self._op(OperatorKind.CO_PROCESS, "CoProcess", func, output_type)
        raise TypeError(f"process expects a CoProcessFunction or KeyedCoProcessFunction, got {type(func).__name__}")


class BroadcastStream:
    """A stream every parallel instance of the downstream operator sees in full."""

    def __init__(self, stream: "DataStream", descriptors: tuple[MapStateDescriptor, ...]) -> None:
        self.stream = stream
        self.descriptors = descriptors


class BroadcastConnectedStream:
    def __init__(self, regular: "DataStream", broadcast: BroadcastStream) -> None:
        self.regular = regular
        self.broadcast = broadcast

    def process(self, func: Any, output_type: Any = None) -> "DataStream":
        from millstream.engine.datastream.data_stream import DataStream, KeyedStream

        if isinstance(func, KeyedBroadcastProcessFunction):
            if not isinstance(self.regular, KeyedStream):
                raise TypeError("a KeyedBroadcastProcessFunction needs a keyed stream: key_by(...).connect(broadcast)")
            kind, name = OperatorKind.KEYED_BROADCAST_PROCESS, "Co-Process-Broadcast-Keyed"
        elif isinstance(func, BroadcastProcessFunction):
            if isinstance(self.regular, KeyedStream):
                raise TypeError("a keyed stream connected to a broadcast stream needs a KeyedBroadcastProcessFunction")
            kind, name = OperatorKind.BROADCAST_PROCESS, "Co-Process-Broadcast"
        else:
            raise TypeError(f"process expects a (Keyed)BroadcastProcessFunction, got {type(func).__name__}")
        env = self.regular._env
        tid = env._add(
            kind,
            name,
            (self.regular._id, self.broadcast.stream._id),
            function=func,
            output_type=output_type,
            params={"broadcast_states": [d.name for d in self.broadcast.descriptors]},
        )
        return DataStream(env, tid)
