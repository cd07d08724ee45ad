"""Map, flat_map and filter on a KeyedStream as keyed process functions, as PyFlink runs them.

A rich function (one that overrides ``open``, where it gets the RuntimeContext) after key_by may
use keyed state, so it runs as a KeyedProcessFunction: the record's key is the current key, its
state lives in key groups, and both engines (the native KEYED PROCESS operator and Spark's sorted
per-key execution) scope it the same way. Plain callables cannot reach keyed state and stay on
the cheaper map/flat_map/filter operators.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from millstream.engine.datastream.functions import (
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedProcessFunction,
    MapFunction,
    RuntimeContext,
)


def may_use_keyed_state(function: Any) -> bool:
    """Only through the runtime context its ``open`` gets can a function hold state handles."""
    return isinstance(function, Function) and type(function).open is not Function.open


class _KeyedAdapter(KeyedProcessFunction):
    """Forwards open/close to the user's function, which it names in errors and plans."""

    def __init__(self, function: Function) -> None:
        self.function = function

    def open(self, runtime_context: RuntimeContext) -> None:
        self.function.open(runtime_context)

    def close(self) -> None:
        self.function.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.function!r})"


class KeyedMapAdapter(_KeyedAdapter):
    def open(self, runtime_context: RuntimeContext) -> None:
        super().open(runtime_context)
        f = self.function
        self._map: Callable[[Any], Any] = f.map if isinstance(f, MapFunction) else f  # type: ignore[assignment]

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterable[Any]:
        return (self._map(value),)


class KeyedFlatMapAdapter(_KeyedAdapter):
    def open(self, runtime_context: RuntimeContext) -> None:
        super().open(runtime_context)
        f = self.function
        self._flat_map: Callable[[Any], Any] = f.flat_map if isinstance(f, FlatMapFunction) else f  # type: ignore[assignment]

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
        return self._flat_map(value)  # consumed at once, while the record's key is current


class KeyedFilterAdapter(_KeyedAdapter):
    def open(self, runtime_context: RuntimeContext) -> None:
        super().open(runtime_context)
        f = self.function
        self._filter: Callable[[Any], Any] = f.filter if isinstance(f, FilterFunction) else f  # type: ignore[assignment]

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterable[Any]:
        return (value,) if self._filter(value) else ()
