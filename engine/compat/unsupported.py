"""Placeholders for PyFlink names Millstream does not implement.

A program that imports such a name still imports (so a module that merely
mentions a Kafka source loads), but using it (instantiating the class, or
calling any of its class-level builders) raises ``NotSupportedError`` saying
why and what to use instead. ``isinstance`` checks against it are simply False.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, NoReturn


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


def unsupported_function(name: str, module: str, why: str, instead: str = "") -> Callable[..., NoReturn]:
    """A module-level function named ``name`` (of ``module``) that raises NotSupportedError whatever it is
    given, so PyFlink's signature does not matter: the call explains itself, not a TypeError."""
    message = _message(f"{module.replace('millstream.engine.', 'pyflink.', 1)}.{name}", why, instead)

    def function(*args: Any, **kwargs: Any) -> NoReturn:
        raise NotSupportedError(message)

    function.__name__ = function.__qualname__ = name
    function.__module__ = module
    function.__doc__ = message
    function.__not_supported__ = message  # type: ignore[attr-defined]
    return function


def not_supported(feature: str, why: str, instead: str = "") -> NotSupportedError:
    """The error a supported class raises from a method whose feature is missing."""
    return NotSupportedError(_message(feature, why, instead))


class unsupported_method:
    """A PyFlink method Millstream's class has no meaning for: it exists (so ``hasattr`` and a program
    that merely mentions it work), and calling it raises NotSupportedError naming the alternative.
    The message names the class it was reached through (``FileSource.get_java_function``)."""

    def __init__(self, why: str, instead: str = "") -> None:
        self.why = why
        self.instead = instead
        self.name = "?"

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Callable[..., Any]:
        cls = objtype if objtype is not None else type(obj)
        feature = f"{cls.__module__.replace('millstream.engine.', 'pyflink.', 1)}.{cls.__qualname__}.{self.name}"
        why, instead = self.why, self.instead

        def method(*args: Any, **kwargs: Any) -> Any:
            raise NotSupportedError(_message(feature, why, instead))

        method.__name__ = self.name
        method.__doc__ = _message(feature, why, instead)
        return method


def java_only(instead: str) -> unsupported_method:
    """PyFlink's ``get_java_*`` methods: they hand out the Java object behind a Python one through Py4J."""
    return unsupported_method("it returns the Java object behind this one, and Millstream runs no JVM", instead)


def is_unsupported(obj: Any) -> bool:
    """True for placeholders made here (the names test and the docs generator tell them apart)."""
    if isinstance(obj, _UnsupportedMeta):
        return True
    return inspect.isfunction(obj) and getattr(obj, "__not_supported__", None) is not None


__all__ = [
    "NotSupportedError",
    "declare_unsupported",
    "is_unsupported",
    "java_only",
    "not_supported",
    "unsupported_class",
    "unsupported_function",
    "unsupported_method",
]
