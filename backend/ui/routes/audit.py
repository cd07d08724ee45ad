"""The Audit page: the latest mutating requests from the audit log, refreshed every few seconds."""
from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from millstream.backend.api.audit import AuditLogDep
from millstream.backend.ui.templating import templates

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/audit", response_class=HTMLResponse)
def audit_page(request: Request, audit: AuditLogDep, limit: int = Query(200, ge=1, le=1000)) -> Response:
    ctx = {"page": "audit", "entries": audit.recent(limit), "limit": limit}
    return templates.TemplateResponse(request, "audit.html", ctx)
