"""``SqlLeaderFence``: the leader lease's fencing token, enforced in the job database.

A JobManager that takes the lease raises the fence to its token before it reads any job
(``claim``). From then on every job write (``SqlJobStore``) first runs ``check`` in its own
transaction: an UPDATE that matches only while the fence still holds this JobManager's token. The
UPDATE locks the row (PostgreSQL) or the database (SQLite) until the write commits, so a successor's
claim cannot slip between the check and the write; a JobManager that lost the lease gets
:class:`FencedOut` and its write is rolled back.

The same check guards every other write a JobManager makes to the cluster's shared state: the audit
log, dashboard sessions and uploaded programs (``fenced_write``, with the leadership's current term as
the fence, backend/leadership.py). A deposed leader may still read them.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Protocol

from sqlalchemy import select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence.models import JobManagerLeaderRow
from millstream.engine.jobmanager.leader_election import FencedOut
from millstream.engine.jobmanager.leader_lease import Lease

_TABLE = JobManagerLeaderRow.__table__


class WriteFence(Protocol):
    """Anything that refuses a write transaction (FencedOut) unless this JobManager leads."""

    def check(self, session: Session) -> None: ...


@contextmanager
def fenced_write(sessions: sessionmaker[Session], fence: WriteFence | None) -> Iterator[Session]:
    """A write transaction whose first statement is the fence check (none without a fence: no HA)."""
    with sessions.begin() as session:
        if fence is not None:
            fence.check(session)
        yield session


class SqlLeaderFence:
    def __init__(self, session_factory: sessionmaker[Session], token: int | None = None) -> None:
        self._sessions = session_factory
        self.token = token  # ours while we lead; None: every fenced write is refused

    def highest_token(self) -> int:
        with self._sessions() as session:
            return int(session.scalar(select(JobManagerLeaderRow.token).where(JobManagerLeaderRow.id == 1)) or 0)

    def claim(self, lease: Lease) -> bool:
        """Raise the fence to ``lease.token``; False if it is at that token or beyond already."""
        with self._sessions.begin() as session:
            _ensure_row(session)
            done = session.execute(
                update(_TABLE)
                .where(_TABLE.c.id == 1, _TABLE.c.token < lease.token)
                .values(token=lease.token, address=lease.address, since=lease.since_ms)
            ).rowcount
        if done:
            self.token = lease.token
        return bool(done)

    def next_epoch(self) -> int:
        """A JobManager without HA starts: the next number of the same sequence as the lease tokens,
        for its epoch (every message to its inbox must carry it)."""
        with self._sessions.begin() as session:
            _ensure_row(session)
            session.execute(update(_TABLE).where(_TABLE.c.id == 1).values(token=_TABLE.c.token + 1))
            return int(session.scalar(select(JobManagerLeaderRow.token).where(JobManagerLeaderRow.id == 1)))

    def release(self) -> None:
        """Stop writing: every fenced write from now on is refused."""
        self.token = None

    def check(self, session: Session) -> None:
        """Inside a write's transaction: raise :class:`FencedOut` unless the fence holds our token."""
        token = self.token
        if token is None:
            raise FencedOut("this JobManager is not the leader: it may not change the cluster's state")
        matched = session.execute(
            update(_TABLE).where(_TABLE.c.id == 1, _TABLE.c.token == token).values(token=token)
        ).rowcount
        if matched != 1:
            self.token = None
            raise FencedOut(f"fencing token {token} is stale: another JobManager leads now")


def _ensure_row(session: Session) -> None:
    """The fence row, at token 0, unless it exists: never overwrites a token (two first leaders may race)."""
    dialect = session.get_bind().dialect.name
    insert = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}.get(dialect)
    if insert is None:
        raise NotImplementedError(f"no leader fence for dialect {dialect!r}")
    session.execute(
        insert(_TABLE).values(id=1, token=0, address="", since=0).on_conflict_do_nothing(index_elements=["id"])
    )
