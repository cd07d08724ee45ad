"""Backend test defaults: Starlette's TestClient calls itself ``testserver``, a name the
OriginGuard refuses on a cluster without a token, so these tests allow it explicitly; and
savepoints go to the test's own tmp_path, which the state-directory allowlist names.

``database_url`` gives a fresh, empty job database of each kind Millstream supports: SQLite
always, and PostgreSQL (a throwaway schema) when one is reachable."""
from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

POSTGRES_URL = os.environ.get("MILLSTREAM_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


@pytest.fixture(autouse=True)
def _allow_testserver_host(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("MILLSTREAM_ALLOWED_HOSTS", "testserver")
    # Savepoint targets in these tests are tmp_path/...: the operator's allowlist names it.
    monkeypatch.setenv("MILLSTREAM_STATE_DIRS", str(tmp_path))


def _libpq_dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.fixture(scope="session")
def postgres_available() -> bool:
    try:
        psycopg.connect(_libpq_dsn(POSTGRES_URL), connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """A fresh, empty database, with no tables yet."""
    if request.param == "sqlite":
        # A missing directory: make_engine must create it.
        yield f"sqlite:///{tmp_path / 'nested' / 'millstream.db'}"
        return
    if not request.getfixturevalue("postgres_available"):
        pytest.skip(f"PostgreSQL not reachable at {POSTGRES_URL}")
    schema = f"ms_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq_dsn(POSTGRES_URL), autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        # Every connection, Alembic's included, resolves unqualified tables in the schema.
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(_libpq_dsn(POSTGRES_URL), autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
