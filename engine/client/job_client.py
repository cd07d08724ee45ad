"""The ``JobClient`` protocol returned by ``execute_async``, and a result iterator helper."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

if TYPE_CHECKING:
    # Only a hint: importing engine.common here would cycle back (engine.common.job_client re-exports
    # this module's JobClient as pyflink.common.job_client does).
    from millstream.engine.common.job_execution_result import JobExecutionResult


class JobClient(Protocol):
    def get_job_id(self) -> str: ...

    def get_job_status(self) -> str: ...

    def cancel(self) -> None: ...

    def get_job_execution_result(self) -> JobExecutionResult: ...

    def collect(self, node_id: int, limit: int | None) -> "CloseableIterator": ...


class CloseableIterator:
    """PyFlink's ``execute_and_collect`` result: an iterator usable as a context manager.

    ``records`` yields the records the collect protocol made final (see collect_result_buffer.py);
    closing the iterator before the end cancels the job, as in PyFlink."""

    def __init__(
        self,
        it: Iterator[Any],
        on_close: Callable[[], None] | None = None,
        limit: int | None = None,
        convert: Callable[[Any], Any] | None = None,
    ) -> None:
        self._it = it
        self._on_close = on_close
        self._limit = limit
        self._convert = convert
        self._count = 0
        self._closed = False

    def __iter__(self) -> "CloseableIterator":
        return self

    def __next__(self) -> Any:
        if self._closed or (self._limit is not None and self._count >= self._limit):
            self.close()
            raise StopIteration
        value = next(self._it)
        self._count += 1
        return self._to_user_record(value)

    def _to_user_record(self, value: Any) -> Any:
        """The one place every collected record passes on its way to the user: PyFlink converts it
        to the stream's declared type here (its convert_to_python_obj), through ``convert``."""
        return value if self._convert is None else self._convert(value)

    def next(self) -> Any:
        """PyFlink's spelling of ``next(it)``."""
        return self.__next__()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._on_close:
                self._on_close()

    def __enter__(self) -> "CloseableIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
