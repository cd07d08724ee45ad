"""``JobExecutionResult`` and ``JobExecutionException``: what ``execute()`` returns or raises."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class JobExecutionException(Exception):
    """The job did not finish: it failed or was cancelled. The message carries the root cause."""

    def __init__(self, job_id: str, status: str, cause: str | None) -> None:
        super().__init__(f"Job {job_id} ended {status}" + (f": {cause}" if cause else ""))
        self.job_id = job_id
        self.status = status
        self.cause = cause


@dataclass(frozen=True)
class JobExecutionResult:
    job_id: str
    net_runtime_ms: int
    accumulators: dict[str, Any] = field(default_factory=dict)

    def get_job_id(self) -> str:
        return self.job_id

    def get_net_runtime(self) -> int:
        return self.net_runtime_ms

    def get_all_accumulator_results(self) -> dict[str, Any]:
        return dict(self.accumulators)

    def get_accumulator_result(self, name: str) -> Any:
        return self.accumulators.get(name)

    def __str__(self) -> str:
        return f"JobExecutionResult(job_id={self.job_id}, net_runtime={self.net_runtime_ms} ms)"
