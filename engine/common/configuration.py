"""``Configuration``: a typed string map, as PyFlink's ``pyflink.common.Configuration``."""
from __future__ import annotations

from typing import Any

from millstream.engine.common.config_options import parse_boolean


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
        return parse_boolean(self._data[key])

    def get_float(self, key: str, default_value: float = 0.0) -> float:
        return float(self._data[key]) if key in self._data else float(default_value)

    def set_float(self, key: str, value: float) -> "Configuration":
        self._data[key] = repr(float(value))
        return self

    def get_bytearray(self, key: str, default_value: bytearray | None = None) -> bytearray:
        # Flink stores bytes Base64-encoded in its string map; so do we.
        import base64

        if key not in self._data:
            return bytearray(default_value or b"")
        return bytearray(base64.b64decode(self._data[key]))

    def set_bytearray(self, key: str, value: bytes | bytearray) -> "Configuration":
        import base64

        self._data[key] = base64.b64encode(bytes(value)).decode("ascii")
        return self

    def key_set(self) -> set[str]:
        return set(self._data)

    def add_all_to_dict(self, target_dict: dict[str, Any]) -> None:
        target_dict.update(self._data)

    def remove_config(self, key: str) -> bool:
        return self._data.pop(key, None) is not None

    @classmethod
    def from_dict(cls, map: dict[str, str]) -> "Configuration":  # noqa: A002 (PyFlink's parameter name)
        config = cls()
        for k, v in map.items():
            config.set_string(k, v)
        return config

    @staticmethod
    def parse_list_value(value: str) -> list[Any]:
        """A list option's text: YAML list syntax (``[a, b]``), or items separated by ``;``."""
        if not value:
            return []
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            # Flat YAML flow lists only (what list options hold): [a, 'b c', "d"].
            items = [item.strip() for item in text[1:-1].split(",") if item.strip()]
            return [item[1:-1] if len(item) > 1 and item[0] == item[-1] and item[0] in "'\"" else item for item in items]
        return value.split(";")

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
