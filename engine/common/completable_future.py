"""``pyflink.common.completable_future``: ``CompletableFuture``, what PyFlink's ``JobClient`` calls return.

PyFlink wraps a Java future; here the value comes from a callable that blocks until it is
known (for a job's result: until the job ended), run once on the first ``result()``.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

__all__ = ["CompletableFuture"]

_UNSET = object()


class CompletableFuture:
    def __init__(self, supplier: Callable[[], Any], is_done: Callable[[], bool] | None = None) -> None:
        self._supplier = supplier
        self._is_done = is_done
        self._lock = threading.Lock()
        self._value: Any = _UNSET
        self._error: BaseException | None = None

    @staticmethod
    def completed(value: Any) -> "CompletableFuture":
        return CompletableFuture(lambda: value, lambda: True)

    def _settle(self) -> None:
        with self._lock:
            if self._value is _UNSET and self._error is None:
                try:
                    self._value = self._supplier()
                except BaseException as e:  # kept, and raised by every result() as Java's get() does
                    self._error = e

    def cancel(self) -> bool:
        """A job's future cannot be cancelled; cancel the job with ``JobClient.cancel()``."""
        return False

    def cancelled(self) -> bool:
        return False

    def done(self) -> bool:
        if self._value is not _UNSET or self._error is not None:
            return True
        return bool(self._is_done()) if self._is_done is not None else False

    def result(self) -> Any:
        """The value, waiting for it if needed; raises what computing it raised."""
        self._settle()
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self) -> BaseException | None:
        self._settle()
        return self._error

    def __str__(self) -> str:
        return f"CompletableFuture(done={self.done()})"
