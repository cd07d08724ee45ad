"""Alembic environment: migrates the database whose URL the config carries,
comparing against the metadata of ``millstream.backend.persistence.models``."""
from __future__ import annotations

from logging.config import fileConfig

from alembic import context

from millstream.backend.persistence.database import make_engine
from millstream.backend.persistence.models import Base

config = context.config
target_metadata = Base.metadata

# Only the command line passes an ini file; a programmatic upgrade inside the
# JobManager must not have its logging reconfigured.
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _database_url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from millstream.backend.settings import Settings

    return Settings().resolved_database_url


def run_migrations_offline() -> None:
    url = _database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        render_as_batch=url.startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    # Foreign keys stay off on SQLite here: batch mode rebuilds tables by
    # dropping them, which would cascade-delete child rows with enforcement on.
    engine = make_engine(_database_url(), foreign_keys=False)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                # SQLite cannot ALTER most things; batch mode copies the table instead.
                render_as_batch=connection.dialect.name == "sqlite",
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
