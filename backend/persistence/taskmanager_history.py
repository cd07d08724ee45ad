"""``TaskManagerHistory``: every TaskManager that ever registered, and how it left."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence.models import TaskManagerRow
from millstream.backend.persistence.upsert import upsert


class TaskManagerState(StrEnum):
    REGISTERED = "REGISTERED"
    LOST = "LOST"  # missed its heartbeat timeout
    STOPPED = "STOPPED"  # shut down cleanly

    def is_terminal(self) -> bool:
        return self is not TaskManagerState.REGISTERED


@dataclass(frozen=True)
class TaskManagerInfo:
    id: str
    host: str
    data_port: int | None
    slots: int
    first_seen: int  # epoch ms
    last_seen: int  # epoch ms
    state: TaskManagerState


class TaskManagerHistory:
    def __init__(self, session_factory: sessionmaker[Session]) -> None:
        self._sessions = session_factory

    def upsert_seen(
        self,
        id: str,
        host: str,
        data_port: int | None,
        slots: int,
        now_ms: int,
        state: str = TaskManagerState.REGISTERED,
    ) -> None:
        """Record that the TaskManager is alive now; ``first_seen`` is kept from its first visit."""
        values = {
            "id": id,
            "host": host,
            "data_port": data_port,
            "slots": slots,
            "first_seen": now_ms,
            "last_seen": now_ms,
            "state": TaskManagerState(state).value,
        }
        with self._sessions.begin() as session:
            upsert(
                session,
                TaskManagerRow.__table__,
                values,
                keys=["id"],
                update=["host", "data_port", "slots", "last_seen", "state"],
            )

    def mark(self, id: str, state: str, now_ms: int) -> bool:
        """Set the state (e.g. LOST or STOPPED). False if the TaskManager was never seen."""
        stmt = (
            update(TaskManagerRow)
            .where(TaskManagerRow.id == id)
            .values(state=TaskManagerState(state).value, last_seen=now_ms)
        )
        with self._sessions.begin() as session:
            return session.execute(stmt).rowcount > 0

    def list(self) -> list[TaskManagerInfo]:
        """Every TaskManager, most recently registered first."""
        stmt = select(TaskManagerRow).order_by(TaskManagerRow.first_seen.desc(), TaskManagerRow.id)
        with self._sessions() as session:
            return [
                TaskManagerInfo(
                    id=row.id,
                    host=row.host,
                    data_port=row.data_port,
                    slots=row.slots,
                    first_seen=row.first_seen,
                    last_seen=row.last_seen,
                    state=TaskManagerState(row.state),
                )
                for row in session.scalars(stmt)
            ]
