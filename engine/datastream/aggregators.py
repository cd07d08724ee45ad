"""Built-in reducers behind ``KeyedStream.sum/min/max/min_by/max_by``, and ``DataStream.project``.

A field is a position (tuples, lists, Rows) or a name (Rows with field names),
as in PyFlink. A name is resolved against each record, so a Row stream needs no
declared type; a name on a record without it fails with a message naming the
operator's field and the record's fields.
"""
from __future__ import annotations

from typing import Any

from millstream.engine.common.row import Row
from millstream.engine.datastream.functions import MapFunction, ReduceFunction


def _row_names(record: Row) -> list[str] | None:
    try:
        names = object.__getattribute__(record, "_fields")
    except AttributeError:
        return None
    return list(names) if names else None


def _position(record: Any, field: int | str) -> int:
    if isinstance(field, int):
        return field
    if isinstance(record, Row):
        names = _row_names(record)
        if names is not None and field in names:
            return names.index(field)
        raise KeyError(f"field '{field}' is not a field of {record!r} (fields: {names})")
    raise TypeError(f"aggregating by field name '{field}' needs Rows with field names, got a {type(record).__name__}")


def _copy_row(record: Row, items: list[Any]) -> Row:
    """A Row like ``record`` (names, kind) holding ``items``."""
    names = _row_names(record)
    if names is None:
        row = Row(*items)
    elif hasattr(Row, "set_field_names"):
        row = Row(*items)
        row.set_field_names(names)
    else:
        row = Row(**dict(zip(names, items)))
    if hasattr(record, "get_row_kind") and hasattr(row, "set_row_kind"):
        row.set_row_kind(record.get_row_kind())
    return row


def _replace(record: Any, field: int | str, value: Any) -> Any:
    position = _position(record, field)
    if isinstance(record, Row):
        items = list(record)
        items[position] = value
        return _copy_row(record, items)
    if isinstance(record, tuple):
        return record[:position] + (value,) + record[position + 1 :]
    if isinstance(record, list):
        out = list(record)
        out[position] = value
        return out
    if position != 0:
        raise TypeError(f"cannot aggregate position {position} of a {type(record).__name__}")
    return value


def _field(record: Any, field: int | str) -> Any:
    if isinstance(record, (tuple, list, Row)):
        return record[_position(record, field)]
    if field != 0:
        raise TypeError(f"cannot aggregate field {field!r} of a {type(record).__name__}")
    return record


def _check_field(field: Any) -> int | str:
    if isinstance(field, bool) or not isinstance(field, (int, str)):
        raise TypeError(f"an aggregation field is a position (int) or a field name (str), got {field!r}")
    if isinstance(field, int) and field < 0:
        raise ValueError(f"an aggregation position must not be negative, got {field}")
    return field


class _FieldAggregator(ReduceFunction):
    def __init__(self, position: int | str = 0) -> None:
        self.position = _check_field(position)


class SumAggregator(_FieldAggregator):
    def reduce(self, value1: Any, value2: Any) -> Any:
        p = self.position
        return _replace(value1, p, _field(value1, p) + _field(value2, p))


class MinAggregator(_FieldAggregator):
    """Keeps the first record's other fields, as Flink's ``min`` does."""

    def reduce(self, value1: Any, value2: Any) -> Any:
        p = self.position
        return _replace(value1, p, min(_field(value1, p), _field(value2, p)))


class MaxAggregator(_FieldAggregator):
    def reduce(self, value1: Any, value2: Any) -> Any:
        p = self.position
        return _replace(value1, p, max(_field(value1, p), _field(value2, p)))


class MinByAggregator(_FieldAggregator):
    def reduce(self, value1: Any, value2: Any) -> Any:
        return value2 if _field(value2, self.position) < _field(value1, self.position) else value1


class MaxByAggregator(_FieldAggregator):
    def reduce(self, value1: Any, value2: Any) -> Any:
        return value2 if _field(value2, self.position) > _field(value1, self.position) else value1


class Projection(MapFunction):
    """``project(*positions)``: a tuple of the chosen fields, in the chosen order."""

    # PyFlink runs project() as a Java operator, which its plan never fuses with Python functions.
    java_operator = True

    def __init__(self, positions: tuple[int, ...]) -> None:
        self.positions = positions

    def map(self, value: Any) -> Any:
        if not isinstance(value, tuple):
            # Flink projects Tuple streams only; a Row is not a tuple there either.
            raise TypeError(f"Only Tuple DataStreams can be projected, got a {type(value).__name__}")
        return tuple(value[i] for i in self.positions)
