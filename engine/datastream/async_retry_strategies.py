"""``pyflink.datastream.async_retry_strategies``: when an AsyncFunction call is attempted again.

Attempts are counted from 1 (the first call); ``can_retry(n)`` says whether another attempt may
follow the n-th, so ``max_attempts`` retries follow the first call at most, as in PyFlink.
"""
from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

from millstream.engine.datastream.functions import AsyncRetryPredicate, AsyncRetryStrategy

__all__ = ["ExponentialBackoffDelayRetryStrategy", "FixedDelayRetryStrategy", "NoRetryStrategy", "RetryPredicate"]

OUT = TypeVar("OUT")
ResultTest = Callable[[list[Any]], bool]
ErrorTest = Callable[[Exception], bool]


class RetryPredicate(AsyncRetryPredicate, Generic[OUT]):
    """A result test and an exception test, either of which may be None (never retry on it)."""

    def __init__(self, result_predicate: ResultTest | None, exception_predicate: ErrorTest | None) -> None:
        self._result_predicate = result_predicate
        self._exception_predicate = exception_predicate

    def result_predicate(self) -> ResultTest | None:
        return self._result_predicate

    def exception_predicate(self) -> ErrorTest | None:
        return self._exception_predicate


class NoRetryStrategy(AsyncRetryStrategy, Generic[OUT]):
    """Every call is attempted once."""

    def can_retry(self, current_attempts: int) -> bool:
        return False

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return -1

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return RetryPredicate(None, None)


def _positive(name: str, value: float) -> None:
    # PyFlink asserts these; an AssertionError with its wording keeps programs' error handling the same.
    assert value > 0, f"{name} should be greater than zero."


class FixedDelayRetryStrategy(AsyncRetryStrategy, Generic[OUT]):
    """Up to ``max_attempts`` retries, each ``backoff_time_millis`` after the previous attempt ended."""

    def __init__(
        self,
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: ResultTest | None,
        exception_predicate: ErrorTest | None,
    ) -> None:
        _positive("max_attempts", max_attempts)
        _positive("backoff_time_millis", backoff_time_millis)
        self._max_attempts = max_attempts
        self._backoff_time_millis = backoff_time_millis
        self._predicate = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return self._backoff_time_millis

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return self._predicate


class ExponentialBackoffDelayRetryStrategy(AsyncRetryStrategy, Generic[OUT]):
    """Up to ``max_attempts`` retries; the delay starts at ``initial_delay`` and grows by
    ``multiplier`` per retry, capped at ``max_retry_delay``.

    The delay depends only on the attempt number (not on a delay remembered from the previous
    call), so concurrent calls sharing the strategy do not disturb each other's backoff.
    """

    def __init__(
        self,
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: ResultTest | None,
        exception_predicate: ErrorTest | None,
    ) -> None:
        _positive("max_attempts", max_attempts)
        _positive("initial_delay", initial_delay)
        _positive("max_retry_delay", max_retry_delay)
        _positive("multiplier", multiplier)
        self._max_attempts = max_attempts
        self._initial_delay = initial_delay
        self._max_retry_delay = max_retry_delay
        self._multiplier = multiplier
        self._predicate = RetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self._max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        delay = float(self._initial_delay)
        for _ in range(max(current_attempts, 1) - 1):
            delay = min(int(delay * self._multiplier), self._max_retry_delay)
        return int(delay)

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return self._predicate


NO_RETRY_STRATEGY: AsyncRetryStrategy = NoRetryStrategy()
