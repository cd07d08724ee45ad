"""Mutating dashboard routes (cancel, login, logout; the savepoint ones are in ``savepoints.py``):
CSRF-checked, login-checked when a token is configured, answering with an inline result and an
``HX-Trigger`` event."""
from __future__ import annotations

import hmac
import json
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from millstream.backend.api.jobs import _JOB_ID
from millstream.backend.deps import DispatcherDep, SettingsDep
from millstream.backend.ui.security import SESSION_COOKIE, UIRefused, check_csrf, check_mutation, logged_in
from millstream.backend.ui.templating import templates
from millstream.engine.jobmanager.dispatcher import UnknownJob

router = APIRouter(prefix="/ui", include_in_schema=False)


def result(
    request: Request, ok: bool, message: str, action: str, status: int = 200,
    extra: dict[str, Any] | None = None, link: tuple[str, str] | None = None,
) -> Response:
    """The inline result fragment, announced to the page as a ``job-action`` event; ``extra``
    (e.g. a savepoint's ``requestId``) rides along in the event, ``link`` is (href, label)."""
    resp = templates.TemplateResponse(
        request, "partials/action_result.html", {"ok": ok, "message": message, "link": link}, status_code=status
    )
    event = {"action": action, "ok": ok, "message": message, **(extra or {})}
    resp.headers["HX-Trigger"] = json.dumps({"job-action": event})
    return resp


def refuse_job_action(request: Request, token: str | None, jid: str, action: str) -> Response | None:
    """The inline refusal of an action on job ``jid`` (no login or CSRF token, or no such job id),
    or None when the action may go ahead."""
    try:
        check_mutation(request, token)
    except UIRefused as e:
        return result(request, False, str(e), action, e.status)
    if not _JOB_ID.fullmatch(jid):
        return result(request, False, f"There is no job {jid}.", action, 404)
    return None


@router.post("/jobs/{jid}/cancel")
def cancel(request: Request, dispatcher: DispatcherDep, settings: SettingsDep, jid: str) -> Response:
    if (refused := refuse_job_action(request, settings.auth_token, jid, "cancel")) is not None:
        return refused
    try:
        changed = dispatcher.cancel(jid.lower())
    except UnknownJob:
        return result(request, False, f"There is no job {jid}.", "cancel", 404)
    msg = "Cancellation requested." if changed else "The job had already ended; nothing to cancel."
    return result(request, True, msg, "cancel")


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, settings: SettingsDep) -> Response:
    ctx = {"page": "login", "needed": bool(settings.auth_token), "done": logged_in(request, settings.auth_token)}
    return templates.TemplateResponse(request, "login.html", ctx)


@router.post("/login")
def login(request: Request, settings: SettingsDep, token: str = Form("")) -> Response:
    try:
        check_csrf(request)
    except UIRefused as e:
        return result(request, False, str(e), "login", e.status)
    expected = settings.auth_token
    if not expected:
        return result(request, True, "This cluster has no access token: no login is needed.", "login")
    if not hmac.compare_digest(token.encode(), expected.encode()):
        return result(request, False, "That token is not right.", "login", 401)
    sessions = request.app.state.ui_sessions
    session_id = sessions.create(expected, request.client.host if request.client else None)
    resp = result(request, True, "Logged in. Actions on this dashboard are now enabled.", "login")
    secure = request.url.scheme == "https"
    resp.set_cookie(
        SESSION_COOKIE, session_id, max_age=int(sessions.ttl_s), httponly=True, samesite="strict", path="/ui",
        secure=secure,
    )
    return resp


@router.post("/logout")
def logout(request: Request) -> Response:
    try:
        check_csrf(request)
    except UIRefused as e:
        return result(request, False, str(e), "logout", e.status)
    request.app.state.ui_sessions.revoke(request.cookies.get(SESSION_COOKIE, ""))  # dead server-side too
    resp = result(request, True, "Logged out.", "logout")
    resp.delete_cookie(SESSION_COOKIE, path="/ui")
    return resp
