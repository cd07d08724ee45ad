"""The audit middleware: every mutating request (REST and dashboard) is recorded in SQL
with who sent it, when, what it asked for (method, path, job id) and the status it got.

It sits outside the token check, so refused requests are recorded too. The job
id comes from the path, or, for a submission, from the answer (``jobid`` in the
JSON body, or the dashboard's ``HX-Redirect`` to the new job's page).
"""
from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from millstream.backend.bearer_auth import bearer_matches
from millstream.backend.persistence.audit_log import AuditEntry
from millstream.backend.persistence.sql_job_store import is_unreachable
from millstream.backend.ui.security import logged_in
from millstream.engine.jobmanager.leader_election import FencedOut

log = logging.getLogger("millstream.audit")

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_JOB_IN_PATH = re.compile(r"/jobs/([0-9a-fA-F]{32})(?:/|$)")
_JOB_ID = re.compile(r"^[0-9a-f]{32}$")
_BODY_CAPTURE_LIMIT = 64 * 1024  # only small JSON answers are read for a job id

# (method, path pattern without /v1, action); the first match names the action.
_ACTIONS = [
    ("POST", re.compile(r"^/jobs$"), "submit"),
    ("PATCH", re.compile(r"^/jobs/[^/]+$"), "cancel"),
    ("POST", re.compile(r"^/jobs/[^/]+/(savepoints|stop)$"), "savepoint"),
    ("POST", re.compile(r"^/jars/upload$"), "upload"),
    ("POST", re.compile(r"^/jars/[^/]+/run$"), "run"),
    ("POST", re.compile(r"^/jars/[^/]+/plan$"), "plan"),
    ("DELETE", re.compile(r"^/jars/[^/]+$"), "delete"),
    ("POST", re.compile(r"^/ui/jobs/[^/]+/cancel$"), "cancel"),
    ("POST", re.compile(r"^/ui/jobs/[^/]+/(savepoint|stop)$"), "savepoint"),
    ("POST", re.compile(r"^/ui/jobs/[^/]+/savepoints/[^/]+/resume$"), "resume"),
    ("POST", re.compile(r"^/ui/submit/upload$"), "upload"),
    ("POST", re.compile(r"^/ui/submit/[^/]+/run$"), "run"),
    ("POST", re.compile(r"^/ui/submit/[^/]+/plan$"), "plan"),
    ("POST", re.compile(r"^/ui/login$"), "login"),
    ("POST", re.compile(r"^/ui/logout$"), "logout"),
]


def action_of(method: str, path: str) -> str:
    bare = path[3:] if path.startswith("/v1/") else path
    for m, pattern, action in _ACTIONS:
        if m == method and pattern.match(bare):
            return action
    return method.lower()


def actor_of(request: Request, token: str | None) -> str:
    """``token`` for a valid bearer token, ``dashboard-session`` for a logged-in dashboard,
    else ``anonymous`` (which is everyone when the cluster has no token)."""
    if token:
        if bearer_matches(request.headers.get("authorization"), token):
            return "token"
        if request.url.path.startswith("/ui/") and logged_in(request, token):
            return "dashboard-session"
    return "anonymous"


def _job_from_answer(headers: dict[bytes, bytes], body: bytes) -> str | None:
    redirect = headers.get(b"hx-redirect", b"").decode("latin-1")
    if m := _JOB_IN_PATH.search(redirect):
        return m.group(1).lower()
    if body and headers.get(b"content-type", b"").startswith(b"application/json"):
        try:
            doc = json.loads(body)
        except ValueError:
            return None
        jid = doc.get("jobid") if isinstance(doc, dict) else None
        if isinstance(jid, str) and _JOB_ID.match(jid):
            return jid
    return None


class AuditMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in MUTATING:
            await self.app(scope, receive, send)
            return
        started = int(time.time() * 1000)
        answer: dict[str, Any] = {"status": 500, "headers": {}, "body": bytearray()}

        async def recording_send(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                answer["status"] = msg["status"]
                answer["headers"] = {k.lower(): v for k, v in msg.get("headers", ())}
            elif msg["type"] == "http.response.body" and len(answer["body"]) < _BODY_CAPTURE_LIMIT:
                answer["body"] += msg.get("body", b"")
            await send(msg)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            await self._record(scope, started, answer)

    async def _record(self, scope: Scope, started: int, answer: dict[str, Any]) -> None:
        audit = getattr(scope["app"].state, "audit", None)
        if audit is None:  # the app has not started its database yet
            return
        request = Request(scope)
        settings = scope["app"].state.settings
        path = scope["path"]
        in_path = _JOB_IN_PATH.search(path)
        body = bytes(answer["body"]) if len(answer["body"]) < _BODY_CAPTURE_LIMIT else b""
        entry = AuditEntry(
            timestamp=started,
            actor=actor_of(request, settings.auth_token),
            action=action_of(scope["method"], path),
            method=scope["method"],
            path=path[:2000],
            status=answer["status"],
            job_id=in_path.group(1).lower() if in_path else _job_from_answer(answer["headers"], body),
            client=scope["client"][0] if scope.get("client") else None,
        )
        try:
            await run_in_threadpool(audit.record, entry)
        except FencedOut:
            # Lost the leadership while serving it (paused past the lease): the log is the leader's now,
            # and a deposed JobManager writes nothing there. Its own log keeps the line.
            log.warning("not recorded in the audit log (this JobManager no longer leads): %s", entry)
        except Exception as e:
            if is_unreachable(e):  # SQL away: the entry is lost (the request itself was served); one line
                log.warning("could not record %s %s in the audit log: the SQL database is unavailable", entry.method, entry.path)
            else:
                log.exception("could not record %s %s in the audit log", entry.method, entry.path)
