"""``Row`` and ``RowKind``, as in ``pyflink.common.types``.

A Row is a mutable list of values with optional field names and a kind (the change it
stands for: +I, -U, +U, -D). It is not a tuple: ``Row(1, 2) != (1, 2)``, as in PyFlink.
``Row("name", "age")`` is a factory: calling it makes rows with those field names.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Iterator


class RowKind(Enum):
    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def short_string(self) -> str:
        return _SHORT[self.value]

    def __str__(self) -> str:
        return _SHORT[self.value]


_SHORT = ("+I", "-U", "+U", "-D")
_KINDS = tuple(RowKind)


class Row:
    """``Row(1, "a")``, ``Row(id=1, name="a")`` (keyword order is kept) or ``Row("id", "name")(1, "a")``."""

    # Slots keep rows small; an unnamed row has no ``_fields`` at all, as in PyFlink
    # (``hasattr(row, "_fields")`` is how code tells named rows apart).
    __slots__ = ("_values", "_fields", "_row_kind", "_from_dict")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("Can not use both args and kwargs to create Row")
        if kwargs:
            object.__setattr__(self, "_fields", list(kwargs))
            object.__setattr__(self, "_values", list(kwargs.values()))
            object.__setattr__(self, "_from_dict", True)
        else:
            object.__setattr__(self, "_values", list(args))
            object.__setattr__(self, "_from_dict", False)
        object.__setattr__(self, "_row_kind", RowKind.INSERT)

    def _names(self) -> list[str] | None:
        try:
            return object.__getattribute__(self, "_fields")
        except AttributeError:
            return None

    # -- PyFlink's API ---------------------------------------------------------
    def as_dict(self, recursive: bool = False) -> dict[str, Any]:
        names = self._names()
        if names is None:
            raise TypeError("Cannot convert a Row class into dict")
        if not recursive:
            return dict(zip(names, self._values))

        def conv(obj: Any) -> Any:
            if isinstance(obj, Row):
                return obj.as_dict(True)
            if isinstance(obj, list):
                return [conv(o) for o in obj]
            if isinstance(obj, dict):
                return {k: conv(v) for k, v in obj.items()}
            return obj

        return dict(zip(names, (conv(v) for v in self._values)))

    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        if not isinstance(row_kind, RowKind):
            raise TypeError(f"a row kind is a RowKind, got {type(row_kind).__name__}")
        object.__setattr__(self, "_row_kind", row_kind)

    def set_field_names(self, field_names: list[str]) -> None:
        object.__setattr__(self, "_fields", list(field_names))

    def get_fields_by_names(self, names: list[str]) -> list[Any]:
        fields = self._names()
        if fields is None or list(names) == fields:
            return self._values
        missing = [n for n in names if n not in fields]
        if missing:
            raise Exception(f"Field names {missing} not exist in {fields}.")
        return [self._values[fields.index(n)] for n in names]

    @staticmethod
    def of_kind(row_kind: RowKind, *args: Any, **kwargs: Any) -> "Row":
        row = Row(*args, **kwargs)
        row.set_row_kind(row_kind)
        return row

    def _is_retract_msg(self) -> bool:
        return self._row_kind in (RowKind.UPDATE_BEFORE, RowKind.DELETE)

    def _is_accumulate_msg(self) -> bool:
        return self._row_kind in (RowKind.UPDATE_AFTER, RowKind.INSERT)

    def __call__(self, *args: Any) -> "Row":
        """A Row of field names makes rows: ``Person = Row("name", "age"); Person("Alice", 11)``."""
        if len(args) > len(self._values):
            raise ValueError(
                f"Can not create Row with fields {self}, expected {len(self._values)} values but got {args}"
            )
        row = Row(*args)
        row.set_field_names(list(self._values))
        row.set_row_kind(self._row_kind)
        return row

    # -- container protocol ----------------------------------------------------
    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, slice)):
            return self._values[item]
        names = self._names()
        if names is None:
            raise KeyError(item)
        if item not in names:
            raise ValueError(item)  # PyFlink's error for an unknown field name
        return self._values[names.index(item)]

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, (int, slice)):
            self._values[key] = value
            return
        names = self._names()
        if names is None or key not in names:
            raise KeyError(key)
        self._values[names.index(key)] = value

    def __getattr__(self, item: str) -> Any:
        # Only called when normal lookup fails: a field name, or an unset slot.
        if item.startswith("_"):
            raise AttributeError(item)
        names = self._names()
        if names is None or item not in names:
            raise AttributeError(item)
        return self._values[names.index(item)]

    def __setattr__(self, key: str, value: Any) -> None:
        if key in Row.__slots__:
            object.__setattr__(self, key, value)
            return
        raise AttributeError(key)

    def __contains__(self, item: Any) -> bool:
        names = self._names()
        return item in (names if names is not None else self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row) or self._row_kind != other._row_kind:
            return False
        mine, theirs = self._names(), other._names()
        if (mine is None) != (theirs is None):
            return False
        if mine is None:
            return self._values == other._values
        if sorted(mine) != sorted(theirs):  # type: ignore[arg-type]
            return False
        # Named rows compare field by field, whatever order the names were given in.
        return all(self[n] == other[n] for n in mine)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        # Equal rows must hash equal: named rows are equal whatever order their names were given
        # in, so they hash by name-sorted (name, value) pairs.
        return hash(self._key_parts())

    def __millstream_key__(self) -> Any:
        # key_by(lambda r: r) works on rows: equal rows give equal keys in every process.
        return (self._key_parts(), self._row_kind.value)

    def _key_parts(self) -> tuple:
        names = self._names()
        if names is None:
            return tuple(self._values)
        return tuple(sorted(zip(names, self._values), key=lambda pair: pair[0]))

    def __reduce__(self):  # names and kind survive pickling (state, cloudpickled programs)
        return (_create_row, (self._names(), tuple(self._values), self._row_kind.value))

    def __repr__(self) -> str:
        names = self._names()
        if names is not None:
            return "Row(%s)" % ", ".join(f"{k}={v!r}" for k, v in zip(names, self._values))
        return "<Row(%s)>" % ", ".join(repr(v) for v in self._values)


def _create_row(fields: list[str] | None, values: tuple[Any, ...], kind: int = 0) -> Row:
    row = Row(*values)
    if fields is not None:
        row.set_field_names(list(fields))
    if kind:
        row.set_row_kind(_KINDS[kind])
    return row


def _make_named_row(fields: tuple[str, ...], values: tuple[Any, ...]) -> Row:
    # Pickles written before Rows had kinds name this function; state and savepoints may hold them.
    return _create_row(list(fields), values)


def make_row(fields: Any, values: Any, kind: int = 0) -> Row:
    """A Row from its parts, as the data plane's decoder rebuilds it."""
    return _create_row(list(fields) if fields is not None else None, values, kind)
