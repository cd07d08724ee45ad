"""The JobStore protocol: where the JobManager keeps durable job history.

The backend implements it with SQLAlchemy; tests and the local mini-cluster use
``InMemoryJobStore``. Records are plain dataclasses so the engine never
imports a database library.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class JobRecord:
    jid: str
    name: str
    state: str
    job_type: str  # STREAMING | BATCH
    start_time: int  # epoch ms
    end_time: int = -1
    last_modification: int = 0
    job_graph: dict[str, Any] = field(default_factory=dict)  # JobGraph.to_dict()
    timestamps: dict[str, int] = field(default_factory=dict)  # state -> first time entered
    # Final per-vertex and per-subtask snapshot (REST shapes), kept so a finished
    # job's detail page still works after the JobManager restarts.
    vertices: list[dict[str, Any]] = field(default_factory=list)
    failure_cause: str | None = None
    user_code: bytes | None = None  # cloudpickled StreamGraph, for recovery


@dataclass
class ExceptionRecord:
    jid: str
    timestamp: int
    exception_name: str
    stacktrace: str
    task_name: str | None = None
    vertex_id: str | None = None
    subtask: int | None = None
    attempt: int | None = None
    endpoint: str | None = None
    taskmanager_id: str | None = None


class JobStore(Protocol):
    def save_job(self, record: JobRecord) -> None:
        """Insert or update the job row by ``jid``; ``user_code=None`` keeps the stored code."""

    def get_job(self, jid: str) -> JobRecord | None: ...

    def list_jobs(self) -> list[JobRecord]:
        """Every job, newest first; records may leave ``user_code`` out."""

    def add_exception(self, record: ExceptionRecord) -> None: ...

    def list_exceptions(self, jid: str, limit: int = 100) -> list[ExceptionRecord]:
        """Newest first."""


class InMemoryJobStore:
    """A JobStore for the local mini-cluster and unit tests."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobRecord] = {}
        self.exceptions: list[ExceptionRecord] = []

    def save_job(self, record: JobRecord) -> None:
        old = self.jobs.get(record.jid)
        if record.user_code is None and old is not None:
            record = dataclasses.replace(record, user_code=old.user_code)
        self.jobs[record.jid] = record

    def get_job(self, jid: str) -> JobRecord | None:
        return self.jobs.get(jid)

    def list_jobs(self) -> list[JobRecord]:
        return sorted(self.jobs.values(), key=lambda r: r.start_time, reverse=True)

    def add_exception(self, record: ExceptionRecord) -> None:
        self.exceptions.append(record)

    def list_exceptions(self, jid: str, limit: int = 100) -> list[ExceptionRecord]:
        rows = [e for e in self.exceptions if e.jid == jid]
        return sorted(rows, key=lambda e: e.timestamp, reverse=True)[:limit]
