"""Built-in reducers behind ``KeyedStream.sum/min/max/min_by/max_by`` (by tuple position)."""
from __future__ import annotations

from typing import Any

from engine.common.row import Row
from engine.datastream.functions import ReduceFunction


def _replace(record: Any, position: int, value: Any) -> Any:
    if isinstance(record, Row):
        items = list(record)
        items[position] = value
        if record._fields:
            return Row(**dict(zip(record._fields, items)))
        return Row(*items)
    if isinstance(record, tuple):
        return record[:position] + (value,) + record[position + 1 :]
    if isinstance(record, list):
        out = list(record)
        out[position] = value
        return out
    if position != 0:
        raise TypeError(f"cannot aggregate position {position} of a {type(record).__name__}")
    return value


def _field(record: Any, position: int) -> Any:
    if isinstance(record, (tuple, list)):
        return record[position]
    if position != 0:
        raise TypeError(f"cannot aggregate position {position} of a {type(record).__name__}")
    return record


class SumAggregator(ReduceFunction):
    def __init__(self, position: int = 0) -> None:
        self.position = position

    def reduce(self, value1: Any, value2: Any) -> Any:
        p = self.position
        return _replace(value1, p, _field(value1, p) + _field(value2, p))


class MinAggregator(ReduceFunction):
    """Keeps the first record's other fields, as Flink's ``min`` does."""

    def __init__(self, position: int = 0) -> None:
        self.position = position

    def reduce(self, value1: Any, value2: Any) -> Any:
        p = self.position
        return _replace(value1, p, min(_field(value1, p), _field(value2, p)))


class MaxAggregator(ReduceFunction):
    def __init__(self, position: int = 0) -> None:
        self.position = position

    def reduce(self, value1: Any, value2: Any) -> Any:
        p = self.position
        return _replace(value1, p, max(_field(value1, p), _field(value2, p)))


class MinByAggregator(ReduceFunction):
    def __init__(self, position: int = 0) -> None:
        self.position = position

    def reduce(self, value1: Any, value2: Any) -> Any:
        return value2 if _field(value2, self.position) < _field(value1, self.position) else value1


class MaxByAggregator(ReduceFunction):
    def __init__(self, position: int = 0) -> None:
        self.position = position

    def reduce(self, value1: Any, value2: Any) -> Any:
        return value2 if _field(value2, self.position) > _field(value1, self.position) else value1
