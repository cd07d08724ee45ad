"""``Configuration``: a typed string map, as PyFlink's ``pyflink.common.Configuration``."""
from __future__ import annotations

from typing import Any


class Configuration:
    """Key/value settings handed to an execution environment."""

    def __init__(self, other: "Configuration | None" = None) -> None:
        self._data: dict[str, str] = dict(other._data) if other else {}

    def set_string(self, key: str, value: str) -> "Configuration":
        self._data[key] = str(value)
        return self

    def get_string(self, key: str, default_value: str = "") -> str:
        return self._data.get(key, default_value)

    def set_integer(self, key: str, value: int) -> "Configuration":
        self._data[key] = str(int(value))
        return self

    def get_integer(self, key: str, default_value: int = 0) -> int:
        return int(self._data[key]) if key in self._data else default_value

    def set_boolean(self, key: str, value: bool) -> "Configuration":
        self._data[key] = "true" if value else "false"
        return self

    def get_boolean(self, key: str, default_value: bool = False) -> bool:
        if key not in self._data:
            return default_value
        return self._data[key].lower() == "true"

    def contains_key(self, key: str) -> bool:
        return key in self._data

    def to_dict(self) -> dict[str, str]:
        return dict(self._data)

    def add_all(self, other: "Configuration") -> "Configuration":
        self._data.update(other._data)
        return self

    def __repr__(self) -> str:
        return f"Configuration({self._data!r})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Configuration) and other._data == self._data
