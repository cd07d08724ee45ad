"""CSRF protection and the login for the dashboard's mutating routes.

A mutating UI request must carry ``HX-Request: true`` (a cross-site form cannot
set a custom header without a CORS preflight, which this server never grants)
and, when the browser says where it comes from, an Origin or Referer of this
very host. When ``MILLSTREAM_AUTH_TOKEN`` is set, it must also carry the session
cookie that ``POST /ui/login`` sets after checking the token: a random id of a
session in SQL (backend/persistence/ui_sessions.py) that expires and that logout
revokes.
"""
from __future__ import annotations

from fastapi import Request

from millstream.backend.origin_guard import cross_site_reason

SESSION_COOKIE = "millstream_ui_session"


class UIRefused(Exception):
    """A mutating UI request that must not run; ``status`` and the message go to the user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def check_csrf(request: Request) -> None:
    if request.headers.get("hx-request") != "true":
        raise UIRefused(403, "This action must come from the dashboard (missing HX-Request header).")
    # The same rule as the REST API's OriginGuard; browsers send Origin on every POST, and
    # only non-browser clients omit it, which cannot have been tricked into a cross-site request.
    reason = cross_site_reason(request.headers)
    if reason:
        raise UIRefused(403, reason[0].upper() + reason[1:] + ".")


def logged_in(request: Request, token: str | None) -> bool:
    if not token:
        return True
    app = request.scope.get("app")
    store = getattr(app.state, "ui_sessions", None) if app is not None else None
    given = request.cookies.get(SESSION_COOKIE, "")
    return store is not None and bool(given) and store.valid(given, token)


def check_mutation(request: Request, token: str | None) -> None:
    """CSRF first, then the login when the cluster has a token."""
    check_csrf(request)
    if not logged_in(request, token):
        raise UIRefused(401, "This cluster requires a login: open /ui/login and enter the access token.")
