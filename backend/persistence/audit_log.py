"""``AuditLog``: the durable record of every mutating request, newest first when read."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from backend.persistence.models import AuditEntryRow


@dataclass(frozen=True)
class AuditEntry:
    timestamp: int  # epoch ms
    actor: str  # token | dashboard-session | anonymous
    action: str
    method: str
    path: str
    status: int
    job_id: str | None = None
    client: str | None = None
    id: int | None = None  # assigned by the database


class AuditLog:
    def __init__(self, session_factory: sessionmaker[Session]) -> None:
        self._sessions = session_factory

    def record(self, entry: AuditEntry) -> None:
        values = {k: v for k, v in asdict(entry).items() if k != "id"}
        with self._sessions.begin() as session:
            session.add(AuditEntryRow(**values))

    def recent(self, limit: int = 100) -> list[AuditEntry]:
        stmt = select(AuditEntryRow).order_by(AuditEntryRow.id.desc()).limit(limit)
        with self._sessions() as session:
            return [
                AuditEntry(
                    id=row.id,
                    timestamp=row.timestamp,
                    actor=row.actor,
                    action=row.action,
                    method=row.method,
                    path=row.path,
                    status=row.status,
                    job_id=row.job_id,
                    client=row.client,
                )
                for row in session.scalars(stmt)
            ]
