"""SQLAlchemy declarative models for every durable table, sharing one ``Base``.

Only portable types are used (JSON, LargeBinary, BigInteger) so the same schema
runs on SQLite and PostgreSQL; Alembic migrations in ``migrations/`` mirror it.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Integer, LargeBinary, MetaData, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Named constraints let Alembic's SQLite batch mode find and alter them later.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class JobRow(Base):
    __tablename__ = "jobs"

    jid: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16))
    job_type: Mapped[str] = mapped_column(String(16))
    start_time: Mapped[int] = mapped_column(BigInteger, index=True)  # epoch ms
    end_time: Mapped[int] = mapped_column(BigInteger, default=-1)  # -1 while running
    last_modification: Mapped[int] = mapped_column(BigInteger, default=0)
    job_graph: Mapped[dict[str, Any]] = mapped_column(JSON)
    timestamps: Mapped[dict[str, int]] = mapped_column(JSON)
    vertices: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    failure_cause: Mapped[str | None] = mapped_column(Text)
    user_code: Mapped[bytes | None] = mapped_column(LargeBinary)
    spark: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))


class JobOutputRow(Base):
    """An ended job's print() output, the newest lines within a bound (engine/jobmanager/job_store.py):
    Redis holds a job's print stream only for an hour after its last line."""

    __tablename__ = "job_output"

    jid: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.jid", ondelete="CASCADE"), primary_key=True)
    lines: Mapped[list[str]] = mapped_column(JSON)
    first_line: Mapped[int] = mapped_column(BigInteger)  # the number of the first line kept; those before were not
    total: Mapped[int] = mapped_column(BigInteger)  # lines the job printed
    kept_at: Mapped[int] = mapped_column(BigInteger)  # epoch ms


class CollectMarkRow(Base):
    """The highest index of one writer's ``execute_and_collect`` entries the JobManager read for a job
    (engine/runtime/io/redis_collect.py): a copy of an entry at or below it is left out. Kept here, not
    only in Redis, because anyone with the Redis URL can delete a key and Redis forgets it on a restart.
    A writer is one attempt's collect sink, so a job has a row per attempt that wrote results."""

    __tablename__ = "collect_marks"

    jid: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.jid", ondelete="CASCADE"), primary_key=True)
    writer: Mapped[str] = mapped_column(String(16), primary_key=True)  # the sink's 8-byte random id, in hex
    high: Mapped[int] = mapped_column(BigInteger)


class StdoutMarkRow(Base):
    """The highest index of one writer's print lines the JobManager read for a job and the line number
    it was at, and how far the stream had been read when the row was last raised
    (engine/security/replay.py's ElementPositions): a copy of a line read before is left out after
    Redis restarted or the stream was deleted, whose own counts start again."""

    __tablename__ = "stdout_marks"

    jid: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.jid", ondelete="CASCADE"), primary_key=True)
    writer: Mapped[str] = mapped_column(String(16), primary_key=True)  # the writer's 8-byte random id, in hex
    high: Mapped[int] = mapped_column(BigInteger)
    position: Mapped[int] = mapped_column(BigInteger)  # the line number ``high`` was read at
    floor: Mapped[int] = mapped_column(BigInteger)  # lines below this index may not be read again (a reset stream)
    upto: Mapped[int] = mapped_column(BigInteger)  # the stream read up to that line (the job's: the max of its rows)


class JobExceptionRow(Base):
    __tablename__ = "job_exceptions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    jid: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.jid", ondelete="CASCADE"), index=True)
    timestamp: Mapped[int] = mapped_column(BigInteger)
    exception_name: Mapped[str] = mapped_column(Text)
    stacktrace: Mapped[str] = mapped_column(Text)
    task_name: Mapped[str | None] = mapped_column(Text)
    vertex_id: Mapped[str | None] = mapped_column(String(64))
    subtask: Mapped[int | None] = mapped_column(Integer)
    attempt: Mapped[int | None] = mapped_column(Integer)
    endpoint: Mapped[str | None] = mapped_column(String(255))
    taskmanager_id: Mapped[str | None] = mapped_column(String(255))


class JarRow(Base):
    """An uploaded program; the id is generated by the server at upload time."""

    __tablename__ = "jars"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    original_name: Mapped[str] = mapped_column(Text)
    stored_path: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)
    uploaded: Mapped[int] = mapped_column(BigInteger)  # epoch ms
    # none_as_null: a missing entry list is SQL NULL, not the JSON literal null.
    entry: Mapped[list[Any] | None] = mapped_column(JSON(none_as_null=True))


class TaskManagerRow(Base):
    """Every TaskManager ever registered, kept after it leaves."""

    __tablename__ = "taskmanagers"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    data_port: Mapped[int | None] = mapped_column(Integer)
    slots: Mapped[int] = mapped_column(Integer)
    first_seen: Mapped[int] = mapped_column(BigInteger)  # epoch ms
    last_seen: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(String(16))  # REGISTERED | LOST | STOPPED


class AuditEntryRow(Base):
    """One mutating request: who sent it, when, what it asked for and how it was answered."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    timestamp: Mapped[int] = mapped_column(BigInteger, index=True)  # epoch ms
    actor: Mapped[str] = mapped_column(String(64))  # token | dashboard-session | anonymous
    client: Mapped[str | None] = mapped_column(String(255))  # the peer address
    action: Mapped[str] = mapped_column(String(32))  # submit, upload, run, cancel, delete, login, ...
    method: Mapped[str] = mapped_column(String(16))
    path: Mapped[str] = mapped_column(Text)
    job_id: Mapped[str | None] = mapped_column(String(32), index=True)
    status: Mapped[int] = mapped_column(Integer)


class UISessionRow(Base):
    """A dashboard login. The cookie holds a random id; only its hash is stored, so the table
    leaks no usable session. Logout deletes the row, which revokes the session everywhere."""

    __tablename__ = "ui_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_fingerprint: Mapped[str] = mapped_column(String(64))  # a token change ends every session
    created: Mapped[int] = mapped_column(BigInteger)  # epoch ms
    expires: Mapped[int] = mapped_column(BigInteger, index=True)  # epoch ms
    client: Mapped[str | None] = mapped_column(String(255))


class CheckpointRow(Base):
    """One checkpoint or savepoint of a job with its statistics; ``detail`` is the whole
    ``CheckpointStats.to_record()`` (per-vertex and per-subtask acks), the columns are for queries."""

    __tablename__ = "checkpoints"

    jid: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.jid", ondelete="CASCADE"), primary_key=True)
    checkpoint_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    status: Mapped[str] = mapped_column(String(16))  # IN_PROGRESS | COMPLETED | FAILED
    checkpoint_type: Mapped[str] = mapped_column(String(16))  # CHECKPOINT | SAVEPOINT | SYNC_SAVEPOINT
    trigger_timestamp: Mapped[int] = mapped_column(BigInteger)  # epoch ms
    latest_ack_timestamp: Mapped[int | None] = mapped_column(BigInteger)
    failure_timestamp: Mapped[int | None] = mapped_column(BigInteger)
    state_size: Mapped[int] = mapped_column(BigInteger, default=0)
    checkpointed_size: Mapped[int] = mapped_column(BigInteger, default=0)
    end_to_end_duration: Mapped[int] = mapped_column(BigInteger, default=0)
    external_path: Mapped[str | None] = mapped_column(Text)
    discarded: Mapped[bool] = mapped_column(Boolean, default=False)
    failure_message: Mapped[str | None] = mapped_column(Text)
    request_id: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)


class CheckpointRestoreRow(Base):
    """The job (re)started from a checkpoint or savepoint: ``latest.restored`` and the restore count."""

    __tablename__ = "checkpoint_restores"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    jid: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.jid", ondelete="CASCADE"), index=True)
    checkpoint_id: Mapped[int] = mapped_column(BigInteger)
    restore_timestamp: Mapped[int] = mapped_column(BigInteger)
    is_savepoint: Mapped[bool] = mapped_column(Boolean)
    external_path: Mapped[str | None] = mapped_column(Text)


class SavepointRow(Base):
    """One savepoint request (trigger or stop-with-savepoint) and its outcome; never deleted with the files."""

    __tablename__ = "savepoints"

    jid: Mapped[str] = mapped_column(String(32), ForeignKey("jobs.jid", ondelete="CASCADE"), primary_key=True)
    request_id: Mapped[str] = mapped_column(String(64), primary_key=True)  # the triggerId
    checkpoint_id: Mapped[int | None] = mapped_column(BigInteger)
    checkpoint_type: Mapped[str] = mapped_column(String(16))  # SAVEPOINT | SYNC_SAVEPOINT
    status: Mapped[str] = mapped_column(String(16))  # IN_PROGRESS | COMPLETED | FAILED
    trigger_timestamp: Mapped[int] = mapped_column(BigInteger, index=True)
    completion_timestamp: Mapped[int | None] = mapped_column(BigInteger)
    target_directory: Mapped[str] = mapped_column(Text)
    path: Mapped[str | None] = mapped_column(Text)
    cancel_job: Mapped[bool] = mapped_column(Boolean, default=False)
    drain: Mapped[bool] = mapped_column(Boolean, default=False)
    failure_cause: Mapped[str | None] = mapped_column(Text)


class JobManagerLeaderRow(Base):
    """The database side of the leader lease's fence: one row holding the largest fencing token a
    leading JobManager has claimed. Every job write checks it inside its own transaction, so a
    JobManager that lost the lease can no longer change job state here (backend/persistence/leader_fence.py)."""

    __tablename__ = "jobmanager_leader"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)  # always 1
    token: Mapped[int] = mapped_column(BigInteger)
    address: Mapped[str] = mapped_column(Text)
    since: Mapped[int] = mapped_column(BigInteger)  # epoch ms the term began
