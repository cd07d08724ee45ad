"""The audit log over REST: ``GET /audit?limit=N``, newest first."""
from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from millstream.backend.persistence.audit_log import AuditLog

router = APIRouter(tags=["audit"])


def get_audit_log(request: Request) -> AuditLog:
    return request.app.state.audit


AuditLogDep = Annotated[AuditLog, Depends(get_audit_log)]


@router.get("/audit", summary="The audit log of mutating requests, newest first")
def audit_log(audit: AuditLogDep, limit: int = Query(100, ge=1, le=1000)) -> dict[str, list[dict[str, Any]]]:
    """``{entries: [{id, timestamp, actor, action, method, path, job_id, status, client}]}``."""
    return {"entries": [asdict(e) for e in audit.recent(limit)]}
