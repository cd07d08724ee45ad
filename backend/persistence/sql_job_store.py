"""``SqlJobStore``: the engine's ``JobStore`` protocol on top of SQLAlchemy.

Jobs, exceptions, checkpoint statistics, restores and savepoints. Each call opens
its own short session, so one store can be shared by every JobManager thread. With a
leader fence (high availability) every write first checks, in its own transaction, that
this JobManager still holds the leader lease (backend/persistence/leader_fence.py).
A database that cannot be reached raises the engine's ``StoreUnavailable`` rather than SQLAlchemy's
error, so the engine can keep its writes until it is back without importing SQLAlchemy.
"""
from __future__ import annotations

import dataclasses
import functools
from contextlib import contextmanager
from typing import Any, Callable, Collection, Iterator, Mapping, TypeVar

from sqlalchemy import func, select, update
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import defer
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence.leader_fence import SqlLeaderFence, fenced_write
from millstream.backend.persistence.models import (
    CheckpointRestoreRow, CheckpointRow, CollectMarkRow, JobExceptionRow, JobOutputRow, JobRow, SavepointRow,
    StdoutMarkRow,
)
from millstream.backend.persistence.upsert import upsert
from millstream.engine.jobmanager.job_store import (
    TERMINAL_STATES, ExceptionRecord, JobOutputRecord, JobRecord, SavepointRecord, StoreUnavailable,
)

_JOB_COLUMNS = [c.name for c in JobRow.__table__.columns]
_SAVEPOINT_COLUMNS = [c.name for c in SavepointRow.__table__.columns]


_F = TypeVar("_F", bound=Callable[..., Any])


def is_unreachable(e: BaseException) -> bool:
    """A connection-level failure (server down, connection refused or cut, database not accepting
    connections), as opposed to an error in a statement."""
    if isinstance(e, (OperationalError, InterfaceError)):
        return True
    return isinstance(e, DBAPIError) and bool(e.connection_invalidated)


def _unavailable_as_store_error(method: _F) -> _F:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except DBAPIError as e:
            if is_unreachable(e):
                raise StoreUnavailable(f"the SQL database is unavailable: {str(e.orig or e).strip().splitlines()[0]}") from e
            raise

    return call  # type: ignore[return-value]


class SqlJobStore:
    def __init__(self, session_factory: sessionmaker[Session], fence: SqlLeaderFence | None = None) -> None:
        self._sessions = session_factory
        self.fence = fence

    @contextmanager
    def _write(self) -> Iterator[Session]:
        """A write transaction, refused (FencedOut, rolled back) when a fence says we no longer lead."""
        with fenced_write(self._sessions, self.fence) as session:
            yield session

    def save_job(self, record: JobRecord) -> None:
        """Insert or update the job row by ``jid``. A record without user code leaves the stored code alone,
        so state changes do not rewrite the program's bytes each time."""
        values = {name: getattr(record, name) for name in _JOB_COLUMNS}
        update = [c for c in _JOB_COLUMNS if c != "jid" and not (c == "user_code" and record.user_code is None)]
        with self._write() as session:
            upsert(session, JobRow.__table__, values, keys=["jid"], update=update)

    def get_job(self, jid: str) -> JobRecord | None:
        with self._sessions() as session:
            row = session.get(JobRow, jid)
            return _to_job_record(row) if row is not None else None

    def list_jobs(self, unfinished_only: bool = False) -> list[JobRecord]:
        """Every job (or only those not in a terminal state), newest first, without the user code
        (``get_job`` has it) and, for a job whose vertices were archived, without its JobGraph: the
        overviews need neither, and loading every stored job's graph on each call made the
        JobManager's memory grow with its history (issue 13's soak)."""
        stmt = select(JobRow).options(defer(JobRow.user_code), defer(JobRow.job_graph))
        if unfinished_only:
            stmt = stmt.where(JobRow.state.not_in(TERMINAL_STATES))
        with self._sessions() as session:
            rows = session.scalars(stmt.order_by(JobRow.start_time.desc(), JobRow.jid))
            # A job that never got an ExecutionGraph has no vertices: its graph is loaded (one row each).
            return [_to_job_record(row, with_code=False, with_graph=unfinished_only or not row.vertices) for row in rows]

    def count_jobs(self, excluding: Collection[str] = ()) -> dict[str, int]:
        """How many stored jobs are in each state, leaving out ``excluding`` (the live ones)."""
        stmt = select(JobRow.state, func.count()).group_by(JobRow.state)
        if excluding:
            stmt = stmt.where(JobRow.jid.not_in(list(excluding)))
        with self._sessions() as session:
            return {state: int(n) for state, n in session.execute(stmt)}

    def add_exception(self, record: ExceptionRecord) -> None:
        """Append to the job's exception history; the job must already be saved."""
        with self._write() as session:
            session.add(
                JobExceptionRow(
                    jid=record.jid,
                    timestamp=record.timestamp,
                    exception_name=record.exception_name,
                    stacktrace=record.stacktrace,
                    task_name=record.task_name,
                    vertex_id=record.vertex_id,
                    subtask=record.subtask,
                    attempt=record.attempt,
                    endpoint=record.endpoint,
                    taskmanager_id=record.taskmanager_id,
                )
            )

    def list_exceptions(self, jid: str, limit: int = 100) -> list[ExceptionRecord]:
        """Newest first."""
        # id breaks timestamp ties so exceptions from the same millisecond keep their order.
        stmt = (
            select(JobExceptionRow)
            .where(JobExceptionRow.jid == jid)
            .order_by(JobExceptionRow.timestamp.desc(), JobExceptionRow.id.desc())
            .limit(limit)
        )
        with self._sessions() as session:
            return [_to_exception_record(row) for row in session.scalars(stmt)]


    # -- checkpoint and savepoint history ---------------------------------------------
    def save_checkpoints(self, jid: str, records: list[dict[str, Any]]) -> None:
        """Upsert checkpoint statistics by (jid, id); the job must already be saved."""
        if not records:
            return
        with self._write() as session:
            for r in records:
                values = _checkpoint_values(jid, r)
                upsert(
                    session, CheckpointRow.__table__, values, keys=["jid", "checkpoint_id"],
                    update=[c for c in values if c not in ("jid", "checkpoint_id")],
                )

    def list_checkpoints(self, jid: str) -> list[dict[str, Any]]:
        stmt = select(CheckpointRow.detail).where(CheckpointRow.jid == jid).order_by(CheckpointRow.checkpoint_id)
        with self._sessions() as session:
            return [dict(d) for d in session.scalars(stmt)]

    def add_checkpoint_restore(self, jid: str, record: dict[str, Any]) -> None:
        with self._write() as session:
            session.add(
                CheckpointRestoreRow(
                    jid=jid,
                    checkpoint_id=int(record["id"]),
                    restore_timestamp=int(record["restore_timestamp"]),
                    is_savepoint=bool(record["is_savepoint"]),
                    external_path=record.get("external_path"),
                )
            )

    def list_checkpoint_restores(self, jid: str) -> list[dict[str, Any]]:
        stmt = select(CheckpointRestoreRow).where(CheckpointRestoreRow.jid == jid).order_by(CheckpointRestoreRow.id)
        with self._sessions() as session:
            return [
                {
                    "id": row.checkpoint_id,
                    "restore_timestamp": row.restore_timestamp,
                    "is_savepoint": row.is_savepoint,
                    "external_path": row.external_path,
                }
                for row in session.scalars(stmt)
            ]

    def save_savepoint(self, record: SavepointRecord) -> None:
        values = dataclasses.asdict(record)
        with self._write() as session:
            upsert(
                session, SavepointRow.__table__, values, keys=["jid", "request_id"],
                update=[c for c in _SAVEPOINT_COLUMNS if c not in ("jid", "request_id")],
            )

    def get_savepoint(self, jid: str, request_id: str) -> SavepointRecord | None:
        with self._sessions() as session:
            row = session.get(SavepointRow, (jid, request_id))
            return _to_savepoint_record(row) if row is not None else None

    def list_savepoints(self, jid: str) -> list[SavepointRecord]:
        stmt = (
            select(SavepointRow)
            .where(SavepointRow.jid == jid)
            .order_by(SavepointRow.trigger_timestamp.desc(), SavepointRow.request_id)
        )
        with self._sessions() as session:
            return [_to_savepoint_record(row) for row in session.scalars(stmt)]

    # -- print() output kept with an ended job ------------------------------------------
    def save_output(self, record: JobOutputRecord) -> None:
        values = {
            "jid": record.jid, "lines": list(record.lines), "first_line": record.first, "total": record.total,
            "kept_at": record.kept_at,
        }
        with self._write() as session:
            upsert(session, JobOutputRow.__table__, values, keys=["jid"], update=[c for c in values if c != "jid"])

    def get_output(self, jid: str) -> JobOutputRecord | None:
        with self._sessions() as session:
            row = session.get(JobOutputRow, jid)
            if row is None:
                return None
            return JobOutputRecord(
                jid=row.jid, lines=list(row.lines), first=row.first_line, total=row.total, kept_at=row.kept_at
            )

    # -- the collect results' high-water marks ------------------------------------------
    def save_collect_marks(self, jid: str, highs: Mapping[bytes, int]) -> None:
        """Insert or raise each writer's row; never lowered (a stale caller cannot reopen a replay)."""
        table = CollectMarkRow.__table__
        with self._write() as session:
            for writer, index in highs.items():
                values = {"jid": jid, "writer": bytes(writer).hex(), "high": int(index)}
                upsert(session, table, values, keys=["jid", "writer"], update=["high"], grow_only="high")

    def get_collect_mark(self, jid: str, writer: bytes) -> int:
        with self._sessions() as session:
            high = session.scalar(
                select(CollectMarkRow.high).where(CollectMarkRow.jid == jid, CollectMarkRow.writer == bytes(writer).hex())
            )
            return -1 if high is None else int(high)

    # -- the print stream's marks ---------------------------------------------------------
    def save_stdout_marks(self, jid: str, marks: Mapping[bytes, tuple[int, int]], upto: int) -> None:
        """Insert or raise each writer's row (its position with its index; never lowered)."""
        table = StdoutMarkRow.__table__
        with self._write() as session:
            for writer, (index, position) in marks.items():
                values = {
                    "jid": jid, "writer": bytes(writer).hex(), "high": int(index), "position": int(position),
                    "floor": 0, "upto": int(upto),
                }
                upsert(
                    session, table, values, keys=["jid", "writer"], update=["high", "position", "upto"], grow_only="high"
                )

    def get_stdout_mark(self, jid: str, writer: bytes) -> tuple[int, int, int, int]:
        with self._sessions() as session:
            row = session.execute(
                select(StdoutMarkRow.high, StdoutMarkRow.position, StdoutMarkRow.floor)
                .where(StdoutMarkRow.jid == jid, StdoutMarkRow.writer == bytes(writer).hex())
            ).first()
            upto = session.scalar(select(func.max(StdoutMarkRow.upto)).where(StdoutMarkRow.jid == jid))
        index, position, floor = (int(row[0]), int(row[1]), int(row[2])) if row is not None else (-1, -1, 0)
        return index, position, floor, -1 if upto is None else int(upto)

    def reset_stdout_marks(self, jid: str, upto: int) -> None:
        with self._write() as session:
            session.execute(
                update(StdoutMarkRow).where(StdoutMarkRow.jid == jid)
                .values(floor=StdoutMarkRow.high + 1, upto=int(upto))
            )


def _checkpoint_values(jid: str, r: dict[str, Any]) -> dict[str, Any]:
    return {
        "jid": jid,
        "checkpoint_id": int(r["id"]),
        "status": r["status"],
        "checkpoint_type": r["checkpoint_type"],
        "trigger_timestamp": int(r["trigger_timestamp"]),
        "latest_ack_timestamp": r.get("latest_ack_timestamp"),
        "failure_timestamp": r.get("failure_timestamp"),
        "state_size": int(r.get("state_size") or 0),
        "checkpointed_size": int(r.get("checkpointed_size") or 0),
        "end_to_end_duration": int(r.get("end_to_end_duration") or 0),
        "external_path": r.get("external_path"),
        "discarded": bool(r.get("discarded")),
        "failure_message": r.get("failure_message"),
        "request_id": r.get("request_id"),
        "detail": dict(r),
    }


def _to_savepoint_record(row: SavepointRow) -> SavepointRecord:
    return SavepointRecord(**{name: getattr(row, name) for name in _SAVEPOINT_COLUMNS})


def _to_job_record(row: JobRow, with_code: bool = True, with_graph: bool = True) -> JobRecord:
    return JobRecord(
        jid=row.jid,
        name=row.name,
        state=row.state,
        job_type=row.job_type,
        start_time=row.start_time,
        end_time=row.end_time,
        last_modification=row.last_modification,
        job_graph=row.job_graph if with_graph else {},
        timestamps=row.timestamps,
        vertices=row.vertices,
        failure_cause=row.failure_cause,
        user_code=row.user_code if with_code else None,
        spark=row.spark,
    )


def _to_exception_record(row: JobExceptionRow) -> ExceptionRecord:
    return ExceptionRecord(
        jid=row.jid,
        timestamp=row.timestamp,
        exception_name=row.exception_name,
        stacktrace=row.stacktrace,
        task_name=row.task_name,
        vertex_id=row.vertex_id,
        subtask=row.subtask,
        attempt=row.attempt,
        endpoint=row.endpoint,
        taskmanager_id=row.taskmanager_id,
    )


for _name in (
    "save_job", "get_job", "list_jobs", "count_jobs", "add_exception", "list_exceptions", "save_checkpoints",
    "list_checkpoints", "add_checkpoint_restore", "list_checkpoint_restores", "save_savepoint", "get_savepoint",
    "list_savepoints", "save_output", "get_output", "save_collect_marks", "get_collect_mark",
    "save_stdout_marks", "get_stdout_mark", "reset_stdout_marks",
):
    setattr(SqlJobStore, _name, _unavailable_as_store_error(getattr(SqlJobStore, _name)))
