"""``Row``: a tuple whose fields may also be named, as in ``pyflink.common.Row``."""
from __future__ import annotations

from typing import Any


class Row(tuple):
    """An immutable record. ``Row(1, "a")`` or ``Row(id=1, name="a")``."""

    _fields: tuple[str, ...] | None

    def __new__(cls, *args: Any, **kwargs: Any) -> "Row":
        if args and kwargs:
            raise ValueError("Row takes either positional or keyword values, not both")
        if kwargs:
            row = super().__new__(cls, kwargs.values())
            row._fields = tuple(kwargs)
            return row
        row = super().__new__(cls, args)
        row._fields = None
        return row

    def as_dict(self) -> dict[str, Any]:
        if self._fields is None:
            raise TypeError("this Row has no field names")
        return dict(zip(self._fields, self))

    def get_fields_by_names(self, names: list[str]) -> list[Any]:
        d = self.as_dict()
        return [d[n] for n in names]

    def __getattr__(self, item: str) -> Any:
        fields = object.__getattribute__(self, "_fields")
        if fields and item in fields:
            return self[fields.index(item)]
        raise AttributeError(item)

    def __reduce__(self):  # keep names across pickling
        if self._fields:
            return (_make_named_row, (self._fields, tuple(self)))
        return (Row, tuple(self))

    def __repr__(self) -> str:
        if self._fields:
            inner = ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self))
        else:
            inner = ", ".join(repr(v) for v in self)
        return f"Row({inner})"


def _make_named_row(fields: tuple[str, ...], values: tuple[Any, ...]) -> Row:
    return Row(**dict(zip(fields, values)))
