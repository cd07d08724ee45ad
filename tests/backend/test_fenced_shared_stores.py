"""The leader fence guards the shared stores besides jobs (issue 18): the audit log, dashboard sessions
and uploaded programs, on a real database (SQLite, and PostgreSQL when one is reachable). A JobManager
whose token was overtaken by a successor's changes none of them; it may still read them."""
from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence.audit_log import AuditEntry, AuditLog
from millstream.backend.persistence.database import make_engine, make_session_factory, upgrade_database
from millstream.backend.persistence.jar_store import JarRepository
from millstream.backend.persistence.leader_fence import SqlLeaderFence
from millstream.backend.persistence.models import AuditEntryRow, JarRow, UISessionRow
from millstream.backend.persistence.ui_sessions import UISessionStore
from millstream.backend.services.programs import ProgramService
from millstream.engine.jobmanager.leader_election import FencedOut
from millstream.engine.jobmanager.leader_lease import Lease

TOKEN = "the-cluster-token"


@pytest.fixture
def sessions(database_url: str) -> Iterator[sessionmaker[Session]]:
    upgrade_database(database_url)
    engine = make_engine(database_url)
    yield make_session_factory(engine)
    engine.dispose()


def _count(sessions: sessionmaker[Session], row: type) -> int:
    with sessions() as s:
        return int(s.scalar(select(func.count()).select_from(row)))


def _entry(path: str) -> AuditEntry:
    return AuditEntry(timestamp=1_000, actor="token", action="upload", method="POST", path=path, status=200)


def _two_terms(sessions: sessionmaker[Session]) -> tuple[SqlLeaderFence, SqlLeaderFence]:
    """The old leader's fence, then a successor's that claimed a larger token over it."""
    old, new = SqlLeaderFence(sessions), SqlLeaderFence(sessions)
    assert old.claim(Lease(7, "http://old:1", 1))
    assert new.claim(Lease(8, "http://new:2", 2))
    return old, new


def test_a_deposed_leader_writes_no_audit_entry_session_or_program(sessions, tmp_path: Path) -> None:
    old, new = _two_terms(sessions)
    # The successor writes, and the deposed leader can read what it wrote.
    AuditLog(sessions, fence=new).record(_entry("/jars/upload"))
    live = UISessionStore(sessions, 3600, fence=new).create(TOKEN)
    programs = ProgramService(JarRepository(sessions, fence=new), tmp_path / "up", 1 << 20, 10)
    kept = programs.upload("kept.py", io.BytesIO(b"print(1)\n"))
    old_audit = AuditLog(sessions, fence=old, retention_days=0)  # would purge every row if it could
    old_sessions = UISessionStore(sessions, 3600, fence=old)
    old_programs = ProgramService(JarRepository(sessions, fence=old), tmp_path / "up", 1 << 20, 10)
    assert [e.path for e in old_audit.recent()] == ["/jars/upload"]
    assert old_sessions.valid(live, TOKEN)
    assert [p.id for p in old_programs.list()] == [kept.id]

    with pytest.raises(FencedOut):
        old_audit.record(_entry("/ui/login"))
    assert old_audit.purge(10**15) == 0
    with pytest.raises(FencedOut):
        old_sessions.create(TOKEN)
    with pytest.raises(FencedOut):
        old_sessions.revoke(live)
    with pytest.raises(FencedOut):
        old_programs.upload("late.py", io.BytesIO(b"print(2)\n"))
    with pytest.raises(FencedOut):
        old_programs.delete(kept.id)

    assert _count(sessions, AuditEntryRow) == 1
    assert _count(sessions, UISessionRow) == 1 and old_sessions.valid(live, TOKEN)
    assert _count(sessions, JarRow) == 1
    # The refused upload left no files behind; the program it could not delete keeps its own.
    assert sorted(p.name for p in (tmp_path / "up").iterdir()) == [kept.id]
    assert Path(kept.stored_path).exists()
    # The fence told the old term it is stale: every later write is refused without asking SQL.
    assert old.token is None


def test_without_a_term_every_write_is_refused_and_without_a_fence_none_is(sessions, tmp_path: Path) -> None:
    standby = SqlLeaderFence(sessions)  # a standby's: no token
    with pytest.raises(FencedOut):
        AuditLog(sessions, fence=standby).record(_entry("/jobs"))
    with pytest.raises(FencedOut):
        UISessionStore(sessions, 3600, fence=standby).create(TOKEN)
    assert _count(sessions, AuditEntryRow) == _count(sessions, UISessionRow) == 0
    # No high availability: no fence, and the writes land as before.
    AuditLog(sessions).record(_entry("/jobs"))
    UISessionStore(sessions, 3600).create(TOKEN)
    ProgramService(JarRepository(sessions), tmp_path / "up", 1 << 20, 10).upload("p.py", io.BytesIO(b"x = 1\n"))
    assert _count(sessions, AuditEntryRow) == _count(sessions, UISessionRow) == _count(sessions, JarRow) == 1
