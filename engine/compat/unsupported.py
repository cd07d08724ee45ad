"""Placeholders for PyFlink names Millstream does not implement.

A program that imports such a name still imports (so a module that merely
mentions a Kafka source loads), but using it (instantiating the class, or
calling any of its class-level builders) raises ``NotSupportedError`` saying
why and what to use instead. ``isinstance`` checks against it are simply False.
"""
from __future__ import annotations

from typing import Any


class NotSupportedError(NotImplementedError):
    """A PyFlink feature Millstream does not have; the message names the alternative."""


def _message(qualname: str, why: str, instead: str) -> str:
    text = f"{qualname} is not supported by Millstream: {why}."
    if instead:
        text += f" Use {instead} instead."
    return text


class _UnsupportedMeta(type):
    """Raises on any class-level use a program could make (``KafkaSource.builder()``)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise NotSupportedError(cls.__not_supported__)

    def __getitem__(cls, params: Any) -> type:
        # ``AsyncFunction[IN, OUT]`` in a class statement: subscripting works, using the class does not.
        return cls

    def __getattr__(cls, name: str) -> Any:
        # Only reached for names the class does not define: dunder probes (pickle, typing,
        # pytest) get an ordinary AttributeError, user calls get the explanation.
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise NotSupportedError(cls.__not_supported__)


def unsupported_class(name: str, module: str, why: str, instead: str = "") -> type:
    """A class named ``name`` (defined in ``module``) that raises NotSupportedError when used."""
    message = _message(f"{module.replace('millstream.engine.', 'pyflink.', 1)}.{name}", why, instead)
    cls = _UnsupportedMeta(name, (), {"__module__": module, "__not_supported__": message, "__doc__": message})
    return cls


def declare_unsupported(namespace: dict[str, Any], names: list[str], why: str, instead: str = "") -> None:
    """Define each of ``names`` in a module's namespace as an unsupported placeholder class."""
    module = namespace["__name__"]
    for name in names:
        namespace[name] = unsupported_class(name, module, why, instead)


def not_supported(feature: str, why: str, instead: str = "") -> NotSupportedError:
    """The error a supported class raises from a method whose feature is missing."""
    return NotSupportedError(_message(feature, why, instead))


def is_unsupported(obj: Any) -> bool:
    """True for placeholders made here (the names test and the docs generator tell them apart)."""
    return isinstance(obj, _UnsupportedMeta)


__all__ = ["NotSupportedError", "declare_unsupported", "is_unsupported", "not_supported", "unsupported_class"]
