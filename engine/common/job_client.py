"""``pyflink.common.job_client``: ``JobClient``, what ``execute_async`` returns.

It wraps the runtime's client (in-process or REST) with PyFlink's signatures: the job id
as a ``JobID``, and status, cancel and result as ``CompletableFuture`` objects.
"""
from __future__ import annotations

from typing import Any

from millstream.engine.common.completable_future import CompletableFuture
from millstream.engine.common.job_id import JobID
from millstream.engine.executiongraph.states import JobStatus

__all__ = ["JobClient"]

_TERMINAL = {"FINISHED", "FAILED", "CANCELED"}


class JobClient:
    def __init__(self, client: Any) -> None:
        self._client = client

    def get_job_id(self) -> JobID:
        return JobID(self._client.get_job_id())

    def get_job_status(self) -> CompletableFuture:
        return CompletableFuture.completed(JobStatus(self._client.get_job_status()))

    def cancel(self) -> CompletableFuture:
        self._client.cancel()
        return CompletableFuture.completed(None)

    def get_job_execution_result(self) -> CompletableFuture:
        """Completes when the job ended: its ``JobExecutionResult``, or the job's failure."""
        return CompletableFuture(
            self._client.get_job_execution_result, lambda: self._client.get_job_status() in _TERMINAL
        )

    def get_accumulators(self) -> CompletableFuture:
        return CompletableFuture.completed({})  # Millstream has no accumulators

    def trigger_savepoint(self, savepoint_directory: str | None = None, formatType: Any = None) -> CompletableFuture:
        from millstream.engine.compat.unsupported import NotSupportedError

        raise NotSupportedError(
            "JobClient.trigger_savepoint is not supported; take a savepoint with `millstream savepoint <job id>` "
            "or POST /jobs/{id}/savepoints"
        )

    def stop_with_savepoint(self, advance_to_end_of_time: bool = False, savepoint_directory: str | None = None,
                            formatType: Any = None) -> CompletableFuture:
        from millstream.engine.compat.unsupported import NotSupportedError

        raise NotSupportedError(
            "JobClient.stop_with_savepoint is not supported; stop with `millstream stop <job id> [--drain]` "
            "or POST /jobs/{id}/stop"
        )

    def __getattr__(self, name: str) -> Any:
        # Millstream's own client methods (wait, collect, ...) stay reachable.
        return getattr(self._client, name)
