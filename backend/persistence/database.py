"""Engine and session setup for SQLite and PostgreSQL, and the programmatic
Alembic upgrade the JobManager runs at startup."""
from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence.models import Base

# Resolved from this file so upgrades work whatever the current directory is.
MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"
# PostgreSQL ends a session left idle inside a transaction for this long (see make_engine).
IDLE_IN_TRANSACTION_TIMEOUT_MS = 10_000


def make_engine(url: str, *, foreign_keys: bool = True) -> Engine:
    """Create an engine; for SQLite, create the file's directory and turn on WAL.

    ``foreign_keys=False`` is for migrations only: with enforcement on, the
    table rebuilds of SQLite batch mode would cascade-delete child rows.
    """
    sa_url = make_url(url)
    if sa_url.get_backend_name() != "sqlite":
        check_database_driver(url)
        connect_args = {"options": _postgres_options(sa_url)} if sa_url.get_backend_name() == "postgresql" else {}
        return create_engine(sa_url, pool_pre_ping=True, connect_args=connect_args)

    database = sa_url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    # Sessions are short and may be opened from any JobManager thread.
    engine = create_engine(sa_url, pool_pre_ping=True, connect_args={"check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        # WAL lets the dashboard read while the JobManager writes.
        cursor.execute("PRAGMA journal_mode=WAL")
        # SQLite ignores foreign keys (and ON DELETE CASCADE) unless asked per connection.
        cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
        cursor.close()

    return engine


def _postgres_options(sa_url: Any) -> str:
    """The URL's own ``options`` (a search_path, say; connect_args replace them) plus the idle timeout.

    A JobManager frozen inside a transaction (SIGSTOP, a VM pause) would hold the leader fence's row
    lock until it woke, and no standby could take over; the server ends such a session instead. Every
    transaction of ours is a few statements long, never idle this long while it runs."""
    given = sa_url.query.get("options", "")
    given = " ".join(given) if isinstance(given, tuple) else given
    return f"{given} -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_MS}".strip()


class DatabaseDriverMissing(RuntimeError):
    """DATABASE_URL names a database whose Python driver is not installed."""


def check_database_driver(url: str) -> None:
    """Raise :class:`DatabaseDriverMissing` naming the extra to install, instead of an ImportError later."""
    sa_url = make_url(url)
    try:
        sa_url.get_dialect().import_dbapi()
    except ImportError as e:
        backend = sa_url.get_backend_name()
        hint = "install millstream[postgres]" if backend == "postgresql" else f"install the {sa_url.drivername} driver"
        raise DatabaseDriverMissing(
            f"DATABASE_URL names {backend} ({sa_url.drivername}), but its driver is not installed ({e}); {hint}"
        ) from e


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    # Repositories return plain dataclasses, but keep loaded rows usable after commit anyway.
    return sessionmaker(bind=engine, expire_on_commit=False)


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` that needs no alembic.ini and no working directory."""
    if not (MIGRATIONS_DIR / "env.py").is_file():
        # Happens when backend/ is installed without the repository's migrations/ beside it.
        raise RuntimeError(f"Alembic migrations not found at {MIGRATIONS_DIR}")
    # No ini file: env.py then leaves the application's logging configuration alone.
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # The ini parser interpolates '%', which URL-encoded passwords and options contain.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade_database(url: str) -> None:
    """Bring the database at ``url`` to the latest migration; a no-op when already there."""
    with _migration_lock(url):
        config = alembic_config(url)
        if _has_unversioned_schema(url):
            # Tables made by Base.metadata.create_all() without Alembic: adopt them
            # as the current head rather than failing on CREATE TABLE.
            command.stamp(config, "head")
        command.upgrade(config, "head")


@contextmanager
def _migration_lock(url: str) -> Iterator[None]:
    """One migration at a time on a SQLite file: JobManagers started together (high availability) would
    otherwise race to create the same tables. PostgreSQL runs each migration in a transaction."""
    sa_url = make_url(url)
    database = sa_url.database
    if sa_url.get_backend_name() != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    lock_path = Path(database).expanduser().with_name(Path(database).name + ".migrate-lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _has_unversioned_schema(url: str) -> bool:
    engine = make_engine(url, foreign_keys=False)
    try:
        with engine.connect() as connection:
            if MigrationContext.configure(connection).get_current_revision() is not None:
                return False
            existing = set(inspect(connection).get_table_names())
            return set(Base.metadata.tables).issubset(existing)
    finally:
        engine.dispose()
