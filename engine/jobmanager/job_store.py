"""The JobStore protocol: where the JobManager keeps durable job history.

Jobs, their exceptions, every checkpoint's statistics (``CheckpointStats.to_record()``
dicts), restores, and savepoints. The backend implements it with SQLAlchemy;
tests and the local mini-cluster use ``InMemoryJobStore``. Records are plain
dataclasses and dicts so the engine never imports a database library.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from collections import Counter
from typing import Any, Collection, Mapping, Protocol

from millstream.engine.executiongraph.states import JobStatus

TERMINAL_STATES = tuple(s.value for s in JobStatus if s.is_terminal())


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
    # A BATCH job on Spark: Spark's final progress (application id, jobs, stages), kept so it still
    # shows once the job has left the JobManager's memory.
    spark: dict[str, Any] | None = None


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


@dataclass
class SavepointRecord:
    """One savepoint request (``POST /jobs/{id}/savepoints`` or ``/stop``) and what became of it."""

    jid: str
    request_id: str  # the client's triggerId, or one the JobManager made up
    status: str  # IN_PROGRESS | COMPLETED | FAILED
    trigger_timestamp: int  # epoch ms
    target_directory: str
    checkpoint_id: int | None = None
    checkpoint_type: str = "SAVEPOINT"  # SAVEPOINT, or SYNC_SAVEPOINT for stop-with-savepoint
    cancel_job: bool = False
    drain: bool = False
    path: str | None = None  # the savepoint directory, once COMPLETED
    completion_timestamp: int | None = None  # when it completed or failed
    failure_cause: str | None = None

    @property
    def is_stop(self) -> bool:
        return self.checkpoint_type == "SYNC_SAVEPOINT"


# How much of a job's print() output SQL keeps once the job ended: the newest lines, within both
# bounds (a line longer than OUTPUT_LINE_CHARS is cut). Redis keeps more, but only for an hour.
OUTPUT_KEPT_LINES = 10_000
OUTPUT_KEPT_CHARS = 2 * 1024 * 1024
OUTPUT_LINE_CHARS = 8 * 1024


@dataclass
class JobOutputRecord:
    """The print() output kept with an ended job: lines ``[first, first + len(lines))`` of the
    ``total`` it printed; the ``first`` before them were not kept (Redis's cap or SQL's)."""

    jid: str
    lines: list[str]
    first: int
    total: int
    kept_at: int  # epoch ms

    @property
    def truncated(self) -> bool:
        return self.first > 0


def bounded_tail(
    lines: list[str], first: int, max_lines: int = OUTPUT_KEPT_LINES, max_chars: int = OUTPUT_KEPT_CHARS,
    line_chars: int = OUTPUT_LINE_CHARS,
) -> tuple[list[str], int]:
    """The newest of ``lines`` (line ``first`` on) that fit ``max_lines`` and ``max_chars``, each cut to
    ``line_chars``; and the number of the first line kept."""
    kept: list[str] = []
    size = 0
    for line in reversed(lines[-max_lines:] if max_lines > 0 else []):
        if len(line) > line_chars:
            line = line[:line_chars] + " [cut]"
        if size + len(line) + 1 > max_chars:
            break
        kept.append(line)
        size += len(line) + 1
    kept.reverse()
    return kept, first + len(lines) - len(kept)


class StoreUnavailable(RuntimeError):
    """The JobStore cannot be reached (its SQL database is down or refuses connections): a transient
    outage, unlike a bad query. Reads answer 503; writes are kept until it is back (write_behind_store.py)."""


class JobStore(Protocol):
    def save_job(self, record: JobRecord) -> None:
        """Insert or update the job row by ``jid``; ``user_code=None`` keeps the stored code."""

    def get_job(self, jid: str) -> JobRecord | None: ...

    def list_jobs(self, unfinished_only: bool = False) -> list[JobRecord]:
        """Every job (or only those in no terminal state), newest first; records may leave
        ``user_code`` out, and ``job_graph`` too when they hold archived ``vertices`` and
        ``unfinished_only`` is False (a listing needs neither; ``get_job`` has both)."""

    def count_jobs(self, excluding: Collection[str] = ()) -> dict[str, int]:
        """How many stored jobs are in each state, leaving out the jobs ``excluding`` names."""

    def add_exception(self, record: ExceptionRecord) -> None: ...

    def list_exceptions(self, jid: str, limit: int = 100) -> list[ExceptionRecord]:
        """Newest first."""

    def save_checkpoints(self, jid: str, records: list[dict[str, Any]]) -> None:
        """Insert or update checkpoint statistics records by (jid, record ``id``)."""

    def list_checkpoints(self, jid: str) -> list[dict[str, Any]]:
        """Every stored checkpoint record of the job, oldest id first."""

    def add_checkpoint_restore(self, jid: str, record: dict[str, Any]) -> None:
        """A ``RestoredCheckpointStats.to_record()``: the job (re)started from that checkpoint."""

    def list_checkpoint_restores(self, jid: str) -> list[dict[str, Any]]:
        """Oldest first."""

    def save_savepoint(self, record: SavepointRecord) -> None:
        """Insert or update by (jid, request_id)."""

    def get_savepoint(self, jid: str, request_id: str) -> SavepointRecord | None: ...

    def list_savepoints(self, jid: str) -> list[SavepointRecord]:
        """Newest first."""

    def save_output(self, record: JobOutputRecord) -> None:
        """Insert or replace the job's kept print() output; the job must already be saved."""

    def get_output(self, jid: str) -> JobOutputRecord | None: ...

    def save_collect_marks(self, jid: str, highs: Mapping[bytes, int]) -> None:
        """Store the highest index read of each of ``highs``' writers of the job's collect results
        (engine/runtime/io/redis_collect.py): the record no Redis writer can reset; the job must be saved."""

    def get_collect_mark(self, jid: str, writer: bytes) -> int:
        """The highest index of ``writer``'s collect entries read for the job; -1 when none was."""

    def save_stdout_marks(self, jid: str, marks: Mapping[bytes, tuple[int, int]], upto: int) -> None:
        """Raise each writer's (highest index, its position) read from the job's print stream, which
        was read up to line ``upto`` (engine/security/replay.py's ``LineMarkStore``)."""

    def get_stdout_mark(self, jid: str, writer: bytes) -> tuple[int, int, int, int]:
        """(highest index, its position, the lowest index that may be read again) of ``writer``'s print
        lines read, and the furthest line read of the job's stream; -1, -1, 0, -1 when not recorded."""

    def reset_stdout_marks(self, jid: str, upto: int) -> None:
        """The job's print stream was found holding ``upto`` lines, fewer than were read: no line read
        before may be read again (each writer's lowest index past its highest), read up to ``upto``."""


class InMemoryJobStore:
    """A JobStore for the local mini-cluster and unit tests."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobRecord] = {}
        self.exceptions: list[ExceptionRecord] = []
        self.checkpoints: dict[str, dict[int, dict[str, Any]]] = {}
        self.restores: dict[str, list[dict[str, Any]]] = {}
        self.savepoints: dict[tuple[str, str], SavepointRecord] = {}
        self.outputs: dict[str, JobOutputRecord] = {}
        self.collect_marks: dict[tuple[str, bytes], int] = {}
        self.stdout_marks: dict[tuple[str, bytes], tuple[int, int, int]] = {}  # (index, position, floor)
        self.stdout_upto: dict[str, int] = {}

    def save_job(self, record: JobRecord) -> None:
        old = self.jobs.get(record.jid)
        if record.user_code is None and old is not None:
            record = dataclasses.replace(record, user_code=old.user_code)
        self.jobs[record.jid] = record

    def get_job(self, jid: str) -> JobRecord | None:
        return self.jobs.get(jid)

    def list_jobs(self, unfinished_only: bool = False) -> list[JobRecord]:
        records = [r for r in self.jobs.values() if not (unfinished_only and r.state in TERMINAL_STATES)]
        return sorted(records, key=lambda r: r.start_time, reverse=True)

    def count_jobs(self, excluding: Collection[str] = ()) -> dict[str, int]:
        skip = set(excluding)
        return dict(Counter(r.state for r in self.jobs.values() if r.jid not in skip))

    def add_exception(self, record: ExceptionRecord) -> None:
        self.exceptions.append(record)

    def list_exceptions(self, jid: str, limit: int = 100) -> list[ExceptionRecord]:
        rows = [e for e in self.exceptions if e.jid == jid]
        return sorted(rows, key=lambda e: e.timestamp, reverse=True)[:limit]

    def save_checkpoints(self, jid: str, records: list[dict[str, Any]]) -> None:
        for r in records:
            self.checkpoints.setdefault(jid, {})[int(r["id"])] = dict(r)

    def list_checkpoints(self, jid: str) -> list[dict[str, Any]]:
        return [dict(r) for _, r in sorted(self.checkpoints.get(jid, {}).items())]

    def add_checkpoint_restore(self, jid: str, record: dict[str, Any]) -> None:
        self.restores.setdefault(jid, []).append(dict(record))

    def list_checkpoint_restores(self, jid: str) -> list[dict[str, Any]]:
        return list(self.restores.get(jid, ()))

    def save_savepoint(self, record: SavepointRecord) -> None:
        self.savepoints[(record.jid, record.request_id)] = dataclasses.replace(record)

    def get_savepoint(self, jid: str, request_id: str) -> SavepointRecord | None:
        r = self.savepoints.get((jid, request_id))
        return dataclasses.replace(r) if r is not None else None

    def list_savepoints(self, jid: str) -> list[SavepointRecord]:
        rows = [dataclasses.replace(r) for (j, _), r in self.savepoints.items() if j == jid]
        return sorted(rows, key=lambda r: r.trigger_timestamp, reverse=True)

    def save_output(self, record: JobOutputRecord) -> None:
        self.outputs[record.jid] = dataclasses.replace(record, lines=list(record.lines))

    def get_output(self, jid: str) -> JobOutputRecord | None:
        r = self.outputs.get(jid)
        return dataclasses.replace(r, lines=list(r.lines)) if r is not None else None

    def save_collect_marks(self, jid: str, highs: Mapping[bytes, int]) -> None:
        for writer, index in highs.items():  # never lowered, as in SQL
            key = (jid, bytes(writer))
            self.collect_marks[key] = max(int(index), self.collect_marks.get(key, -1))

    def get_collect_mark(self, jid: str, writer: bytes) -> int:
        return self.collect_marks.get((jid, bytes(writer)), -1)

    def save_stdout_marks(self, jid: str, marks: Mapping[bytes, tuple[int, int]], upto: int) -> None:
        for writer, (index, position) in marks.items():
            old = self.stdout_marks.get((jid, bytes(writer)), (-1, -1, 0))
            if index > old[0]:
                self.stdout_marks[(jid, bytes(writer))] = (int(index), int(position), old[2])
        self.stdout_upto[jid] = max(int(upto), self.stdout_upto.get(jid, -1))

    def get_stdout_mark(self, jid: str, writer: bytes) -> tuple[int, int, int, int]:
        index, position, floor = self.stdout_marks.get((jid, bytes(writer)), (-1, -1, 0))
        return index, position, floor, self.stdout_upto.get(jid, -1)

    def reset_stdout_marks(self, jid: str, upto: int) -> None:
        for (j, w), (index, position, _) in list(self.stdout_marks.items()):
            if j == jid:
                self.stdout_marks[(j, w)] = (index, position, index + 1)
        self.stdout_upto[jid] = int(upto)
