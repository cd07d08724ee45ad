"""LeaderForwarding: a standby JobManager passes REST and dashboard requests on to the leader (issue 18).

With high availability every JobManager answers. A standby forwards each request (method, path,
query, headers and body) to the leader named by the lease and relays the answer as it streams in
(the dashboard's server-sent events included), so clients, scripts and browsers may talk to any
JobManager and see the leader's live view, as Flink's REST endpoint on a standby answers from the
leader's Dispatcher. What only this process can answer stays here: the ``/jobmanager/leader``
route, this process's own log and config, Prometheus ``/metrics`` and static assets. When no
leader can be reached (a takeover under way) a read is answered here from SQL, with
``X-Millstream-Served-By: standby`` (the dashboard then says it is a standby's view), and a
mutation gets 503 with ``Retry-After``: clients retry it (engine/client/remote.py). A request that
was forwarded once is never forwarded again, so two JobManagers that disagree about the leader
cannot bounce it forever.

Where a browser came from is judged here, where the browser really was: the standby refuses host
names it would not answer itself (DNS rebinding) and mutations a browser marks as cross-site, by the
leader's own rule (backend/origin_guard.py), then forwards without the provenance headers it judged
(``Origin``, ``Referer``, ``Sec-Fetch-*``), under the leader's ``Host``. The leader would otherwise
compare the standby's ``Origin`` with its own address and refuse the standby's own dashboard forms.
The leader still applies its token, session and ``HX-Request`` checks.
"""
from __future__ import annotations

import json
import logging
import re
import httpx
import redis
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from millstream.backend.origin_guard import cross_site_reason, host_allowed

log = logging.getLogger("millstream.forwarding")
logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per forwarded request would drown the JobManager's log

FORWARDED_HEADER = "x-millstream-forwarded"
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_HOP_BY_HOP = frozenset({
    "host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
    "proxy-authorization", "proxy-authenticate",
})
_PROVENANCE = re.compile(r"^(origin|referer|sec-fetch-.*)$")  # judged here, not passed on: see the docstring
_OWN = frozenset({"date", "server", "content-encoding"})  # set by this server itself, or undone by httpx
# Answered by this process whatever its role.
_LOCAL = re.compile(r"^(/v1)?/(jobmanager/(leader|log|logs|config)|docs|redoc|openapi\.json|metrics)(/|$)|^/ui/static/")
# Reads a standby cannot answer from SQL: they need the leader's live state (the collect offsets).
_LIVE_ONLY = re.compile(r"^(/v1)?/jobs/[^/]+/results$")


def _json(status: int, message: str, extra: list[tuple[bytes, bytes]] = ()) -> tuple[dict, bytes]:
    body = json.dumps({"errors": [message]}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    return {"type": "http.response.start", "status": status, "headers": headers}, body


class LeaderForwarding:
    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        guard_hosts: list[str] | None = None,
        allowed_origins: list[str] | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        # Without a token, the Host names this server answers (OriginGuard's rule). The forwarded request
        # carries the leader's Host, so a DNS-rebinding name must be refused here, before forwarding.
        self.guard_hosts = guard_hosts
        self.allowed_origins = list(allowed_origins or [])  # MILLSTREAM_CORS_ORIGINS, as the leader's guard has them
        self.timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None
        self._last_unreachable: str | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        leadership = getattr(scope["app"].state, "leadership", None)
        method, path = scope["method"], scope["path"]
        if (
            leadership is None
            or not leadership.high_availability
            or leadership.serving_leader()
            or _LOCAL.match(path)
        ):
            await self.app(scope, receive, send)
            return
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        if self.guard_hosts is not None and not host_allowed(dict(headers).get("host", ""), self.guard_hosts):
            await self.app(scope, receive, send)  # OriginGuard, inside, refuses it
            return
        already = any(k == FORWARDED_HEADER for k, _ in headers)
        try:
            leader = leadership.leader_address()
        except redis.RedisError:
            leader = None  # Redis away: nobody can be told to lead; answer what SQL can
        if already or leader is None or leader == leadership.address:
            await self._unforwarded(scope, receive, send, None)
            return
        body = await self._body(receive)
        if body is None:
            start, payload = _json(413, f"the request body exceeds {self.max_body_bytes} bytes (max_request_bytes)")
            await send(start)
            await send({"type": "http.response.body", "body": payload})
            return
        query = scope.get("query_string", b"").decode("latin-1")
        url = leader + scope.get("raw_path", path.encode()).decode("latin-1") + (f"?{query}" if query else "")
        if method in MUTATING and (reason := cross_site_reason(dict(headers), self.allowed_origins)):
            start, payload = _json(403, reason)
            await send(start)
            await send({"type": "http.response.body", "body": payload})
            return
        forward = [(k, v) for k, v in headers if k not in _HOP_BY_HOP and not _PROVENANCE.match(k)]
        forward.append((FORWARDED_HEADER, leadership.address))
        http = self._http()
        try:
            r = await http.send(http.build_request(method, url, headers=forward, content=body), stream=True)
        except httpx.TransportError as e:
            if leader != self._last_unreachable:  # once per leader, not per request of a takeover's seconds
                self._last_unreachable = leader
                log.info("the leader %s did not answer %s %s (%s); answering here until one does", leader, method, path, e)
            await self._unforwarded(scope, receive, send, body)
            return
        out = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in r.headers.multi_items()
            if k.lower() not in _HOP_BY_HOP and k.lower() not in _OWN
        ]
        out.append((b"x-millstream-served-by", leader.encode()))
        try:
            await send({"type": "http.response.start", "status": r.status_code, "headers": out})
            # Relayed as it arrives: a page comes in one or two chunks, an event stream stays open.
            async for chunk in r.aiter_bytes():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except httpx.TransportError as e:
            # The leader went away mid-answer. Ours is left unfinished, so the server drops the connection
            # and the client sees a broken answer and asks again (an event stream reconnects). Ended
            # cleanly, a cut-off body would reach it as a whole one: a client reading results got half a
            # msgpack document as a complete 200 and failed the program.
            log.info("the leader %s broke off its answer to %s %s (%s): the connection is dropped", leader, method, path, e)
        finally:
            await r.aclose()

    async def _unforwarded(self, scope: Scope, receive: Receive, send: Send, body: bytes | None) -> None:
        """No leader to forward to: answer reads here from SQL; refuse mutations and live reads with 503."""
        if scope["method"] in MUTATING or _LIVE_ONLY.match(scope["path"]):
            start, payload = _json(
                503, "no JobManager leads right now (a standby is taking over); retry in a moment",
                [(b"retry-after", b"1")],
            )
            await send(start)
            await send({"type": "http.response.body", "body": payload})
            return
        replayed = False

        async def replay() -> Message:
            # The body was read for forwarding: hand it to the app once, then whatever comes next.
            nonlocal replayed
            if body is None or replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def mark(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                msg = {**msg, "headers": [*msg.get("headers", []), (b"x-millstream-served-by", b"standby")]}
            await send(msg)

        await self.app(scope, replay, mark)

    async def _body(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                break
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        return b"".join(chunks)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False)
        return self._client

