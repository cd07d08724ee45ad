"""``UISessionStore``: dashboard logins in SQL, each with an expiry and revocable at logout.

The cookie carries a random session id; the table keeps its SHA-256 and a fingerprint of the
token it was granted under, so rotating ``MILLSTREAM_AUTH_TOKEN`` ends every session, and a
JobManager restart keeps them (they live in SQL, not in memory).

With high availability only the leader creates or revokes sessions: both writes run behind the
leader fence (backend/persistence/leader_fence.py), and a JobManager that lost the lease gets
``FencedOut`` (the request is answered 503, and the browser's retry reaches the leader). Checking a
session is a read: any JobManager may do it.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from millstream.backend.persistence.leader_fence import WriteFence, fenced_write
from millstream.backend.persistence.models import UISessionRow


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def token_fingerprint(token: str) -> str:
    return hmac.new(token.encode(), b"millstream-ui-session-v2", hashlib.sha256).hexdigest()


class UISessionStore:
    def __init__(self, session_factory: sessionmaker[Session], ttl_s: float, fence: WriteFence | None = None) -> None:
        self._sessions = session_factory
        self.fence = fence  # None without high availability
        self.ttl_s = ttl_s

    def create(self, token: str, client: str | None = None) -> str:
        """A new session id for the cookie; expired rows are swept on the way."""
        session_id = secrets.token_urlsafe(32)
        now = int(time.time() * 1000)
        with fenced_write(self._sessions, self.fence) as s:
            s.execute(delete(UISessionRow).where(UISessionRow.expires < now))
            s.add(UISessionRow(
                id_hash=_hash(session_id), token_fingerprint=token_fingerprint(token), created=now,
                expires=now + int(self.ttl_s * 1000), client=(client or "")[:255] or None,
            ))
        return session_id

    def valid(self, session_id: str, token: str) -> bool:
        if not session_id or len(session_id) > 128:
            return False
        with self._sessions() as s:
            row = s.scalar(select(UISessionRow).where(UISessionRow.id_hash == _hash(session_id)))
        return (
            row is not None
            and row.expires > time.time() * 1000
            and hmac.compare_digest(row.token_fingerprint, token_fingerprint(token))
        )

    def revoke(self, session_id: str) -> None:
        if session_id:
            with fenced_write(self._sessions, self.fence) as s:
                s.execute(delete(UISessionRow).where(UISessionRow.id_hash == _hash(session_id)))
