"""``JarRepository``: the rows describing uploaded programs (Flink's "jars").

With high availability only the leader adds or deletes programs: both run behind the leader fence
(backend/persistence/leader_fence.py), so a JobManager that lost the lease gets ``FencedOut`` and
changes nothing (ProgramService then removes the files it had stored). Listing is a read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence.leader_fence import WriteFence, fenced_write
from millstream.backend.persistence.models import JarRow


@dataclass(frozen=True)
class JarInfo:
    id: str
    original_name: str
    stored_path: str
    size: int  # bytes
    uploaded: int  # epoch ms
    entry: tuple[Any, ...] | None  # entry points found in the program, if known


class JarRepository:
    def __init__(self, session_factory: sessionmaker[Session], fence: WriteFence | None = None) -> None:
        self._sessions = session_factory
        self.fence = fence  # None without high availability

    def add(
        self,
        id: str,
        original_name: str,
        stored_path: str,
        size: int,
        uploaded: int,
        entry: list[Any] | None = None,
    ) -> JarInfo:
        row = JarRow(
            id=id,
            original_name=original_name,
            stored_path=stored_path,
            size=size,
            uploaded=uploaded,
            entry=list(entry) if entry is not None else None,
        )
        with fenced_write(self._sessions, self.fence) as session:
            session.add(row)
        return _to_info(row)

    def get(self, id: str) -> JarInfo | None:
        with self._sessions() as session:
            row = session.get(JarRow, id)
            return _to_info(row) if row is not None else None

    def list(self) -> list[JarInfo]:
        """Every uploaded program, newest first."""
        with self._sessions() as session:
            rows = session.scalars(select(JarRow).order_by(JarRow.uploaded.desc(), JarRow.id))
            return [_to_info(row) for row in rows]

    def delete(self, id: str) -> bool:
        """Forget the row; the caller removes the stored file. False if it was unknown."""
        with fenced_write(self._sessions, self.fence) as session:
            return session.execute(delete(JarRow).where(JarRow.id == id)).rowcount > 0


def _to_info(row: JarRow) -> JarInfo:
    return JarInfo(
        id=row.id,
        original_name=row.original_name,
        stored_path=row.stored_path,
        size=row.size,
        uploaded=row.uploaded,
        entry=tuple(row.entry) if row.entry is not None else None,
    )
