"""``AuditLog``: the durable record of every mutating request, newest first when read.

Rows older than the retention are deleted (at start and then every few minutes), and refused
anonymous requests are recorded at most ``refusals_per_minute`` times per client and minute:
a flood of 401s must not fill the database. What is dropped is counted, and one row says how
many were left out when that client's next minute starts.

With high availability the log is the leader's: each insert and purge runs behind the leader fence
(backend/persistence/leader_fence.py), so a JobManager that lost the lease (paused, then woken with
a request still in hand) records nothing more; its refused entries go to its own log instead.
"""
from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence.leader_fence import WriteFence, fenced_write
from millstream.backend.persistence.models import AuditEntryRow
from millstream.engine.jobmanager.leader_election import FencedOut


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


REFUSED = frozenset({401, 403, 429})
_PURGE_EVERY_MS = 10 * 60 * 1000
_MAX_TRACKED_CLIENTS = 10_000


class AuditLog:
    def __init__(
        self,
        session_factory: sessionmaker[Session],
        retention_days: float = 30.0,
        refusals_per_minute: int = 60,
        fence: WriteFence | None = None,
    ) -> None:
        self._sessions = session_factory
        self.fence = fence  # None without high availability
        self.retention_ms = int(retention_days * 86_400_000)
        self.refusals_per_minute = refusals_per_minute
        self._lock = threading.Lock()
        self._windows: dict[str, list[int]] = {}  # client -> [minute, recorded, dropped]
        self._last_purge = 0
        self.purge(int(time.time() * 1000))

    def record(self, entry: AuditEntry) -> None:
        """Insert ``entry``; FencedOut (nothing written) when this JobManager does not lead."""
        rows = []
        if entry.actor == "anonymous" and entry.status in REFUSED:
            admitted, summary = self._admit_refusal(entry)
            if summary is not None:
                rows.append(summary)
            if admitted:
                rows.append(entry)
        else:
            rows.append(entry)
        if rows:
            with fenced_write(self._sessions, self.fence) as session:
                for e in rows:
                    session.add(AuditEntryRow(**{k: v for k, v in asdict(e).items() if k != "id"}))
        if entry.timestamp - self._last_purge >= _PURGE_EVERY_MS:
            self.purge(entry.timestamp)

    def _admit_refusal(self, entry: AuditEntry) -> tuple[bool, AuditEntry | None]:
        client = entry.client or "?"
        minute = entry.timestamp // 60_000
        summary = None
        with self._lock:
            window = self._windows.get(client)
            if window is None or window[0] != minute:
                if window is not None and window[2]:
                    summary = AuditEntry(
                        timestamp=entry.timestamp, actor="anonymous", action="refusals-not-recorded", method="-",
                        path=f"{window[2]} more refused requests from this client in that minute were not recorded",
                        status=0, client=entry.client,
                    )
                if len(self._windows) >= _MAX_TRACKED_CLIENTS:
                    self._windows.clear()
                window = self._windows[client] = [minute, 0, 0]
            if window[1] < self.refusals_per_minute:
                window[1] += 1
                return True, summary
            window[2] += 1
            return False, summary

    def purge(self, now_ms: int) -> int:
        """Delete rows older than the retention; returns how many went (0 when this JobManager does not
        lead: a standby starting up leaves that to the leader)."""
        self._last_purge = now_ms
        try:
            with fenced_write(self._sessions, self.fence) as session:
                result = session.execute(delete(AuditEntryRow).where(AuditEntryRow.timestamp < now_ms - self.retention_ms))
        except FencedOut:
            return 0
        return result.rowcount or 0

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
