"""``pyflink.datastream.async_retry_predicates``: ready-made tests for AsyncFunction retry strategies.

Pass them (or ``functools.partial`` of them) as a strategy's ``result_predicate`` or
``exception_predicate``: True means "attempt the call again".
"""
from __future__ import annotations

from typing import Any

__all__ = ["empty_result_predicate", "exception_type_predicate", "has_exception_predicate"]


def empty_result_predicate(result: list[Any] | None) -> bool:
    """Retry when the call produced no result."""
    return not result


def has_exception_predicate(error: BaseException | None) -> bool:
    """Retry on any exception."""
    return error is not None


def exception_type_predicate(error: BaseException | None, expected_error_type: type | tuple[type, ...]) -> bool:
    """Retry on exceptions of ``expected_error_type`` (bind it with ``functools.partial``)."""
    return isinstance(error, expected_error_type)
