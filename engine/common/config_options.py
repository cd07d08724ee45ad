"""``pyflink.common.config_options``: typed keys for ``Configuration`` (``ConfigOptions.key(...)``)."""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["ConfigOption", "ConfigOptions", "parse_boolean"]


class ConfigOption:
    """A key with a type and a default; ``Configuration.get``/``set`` accept it."""

    def __init__(self, key: str, parse: Callable[[str], Any], default: Any = None, description: str = "") -> None:
        self._key = key
        self._parse = parse
        self._default = default
        self._description = description
        self._fallback_keys: tuple[str, ...] = ()

    def key(self) -> str:
        return self._key

    def has_default_value(self) -> bool:
        return self._default is not None

    def default_value(self) -> Any:
        return self._default

    def with_description(self, description: str) -> "ConfigOption":
        self._description = description
        return self

    def with_fallback_keys(self, *fallback_keys: str) -> "ConfigOption":
        self._fallback_keys = tuple(fallback_keys)
        return self

    def with_deprecated_keys(self, *deprecated_keys: str) -> "ConfigOption":
        return self.with_fallback_keys(*deprecated_keys)

    def parse(self, text: str) -> Any:
        return self._parse(text)

    def __repr__(self) -> str:
        return f"ConfigOption({self._key!r}, default={self._default!r})"


def parse_boolean(value: Any) -> bool:
    """A configuration value as a boolean, as Flink reads one (``ConfigurationUtils.convertToBoolean``):
    ``true`` or ``false`` in any case, around spaces; anything else is an error, not a silent false
    (``state.backend.incremental: yes`` would otherwise switch incremental checkpoints off unseen)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise ValueError(f"Unrecognized option for boolean: {value!r}. Expected either true or false (case insensitive)")


class ConfigOptions:
    """``ConfigOptions.key("k").int_type().default_value(3)``."""

    def __init__(self, key: str) -> None:
        self._key = key

    @staticmethod
    def key(key: str) -> "ConfigOptions.OptionBuilder":
        return ConfigOptions.OptionBuilder(key)

    class OptionBuilder:
        def __init__(self, key: str) -> None:
            self._key = key

        def _typed(self, parse: Callable[[str], Any]) -> "ConfigOptions.TypedConfigOptionBuilder":
            return ConfigOptions.TypedConfigOptionBuilder(self._key, parse)

        def boolean_type(self) -> "ConfigOptions.TypedConfigOptionBuilder":
            return self._typed(parse_boolean)

        def int_type(self) -> "ConfigOptions.TypedConfigOptionBuilder":
            return self._typed(int)

        def long_type(self) -> "ConfigOptions.TypedConfigOptionBuilder":
            return self._typed(int)

        def float_type(self) -> "ConfigOptions.TypedConfigOptionBuilder":
            return self._typed(float)

        def double_type(self) -> "ConfigOptions.TypedConfigOptionBuilder":
            return self._typed(float)

        def string_type(self) -> "ConfigOptions.TypedConfigOptionBuilder":
            return self._typed(str)

    class TypedConfigOptionBuilder:
        def __init__(self, key: str, parse: Callable[[str], Any]) -> None:
            self._key = key
            self._parse = parse

        def default_value(self, value: Any) -> ConfigOption:
            return ConfigOption(self._key, self._parse, value)

        def no_default_value(self) -> ConfigOption:
            return ConfigOption(self._key, self._parse, None)
