"""OriginGuard: which browsers and which host names may talk to this server at all.

A cluster with no token trusts whoever can reach its loopback port. Browsers
can reach it too: any web page can send a ``no-cors`` POST or submit a form to
``http://127.0.0.1:8081`` (the answer is opaque, but the request runs), and a
DNS-rebinding page reaches it under its own host name. So, with no token:

- a request whose ``Host`` is neither a loopback name, the bind address nor a
  name in ``MILLSTREAM_ALLOWED_HOSTS`` is refused (this defeats rebinding,
  which always carries the attacker's name);
- a mutating request a browser marks as coming from another site or origin
  (``Sec-Fetch-Site``, ``Origin``, ``Referer``) is refused unless its origin is
  in ``MILLSTREAM_CORS_ORIGINS``.

Clients that are not browsers send neither header and are not affected. The
dashboard's CSRF check (backend/ui/security.py) uses the same
:func:`cross_site_reason`, so the two cannot drift apart.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def host_name(host_header: str) -> str:
    """The name part of a ``Host`` header, lower case, without port or IPv6 brackets."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def is_loopback(name: str) -> bool:
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_allowed(host_header: str, allowed: Iterable[str]) -> bool:
    name = host_name(host_header)
    return bool(name) and (is_loopback(name) or name in {a.strip().lower() for a in allowed})


def _origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def cross_site_reason(headers: Mapping[str, str], allowed_origins: Iterable[str] = ()) -> str | None:
    """Why a browser request comes from somewhere else than this very origin, or None.

    ``Sec-Fetch-Site`` is trusted first (browsers set it and pages cannot); ``same-site``
    is refused too, because ``localhost:other-port`` is the same site as ``localhost:8081``.
    An ``Origin`` or ``Referer`` naming another host (or ``null``) is refused."""
    allowed = {o.strip().rstrip("/").lower() for o in allowed_origins if o.strip()}
    origin = headers.get("origin")
    if origin is not None and origin.rstrip("/").lower() in allowed:
        return None
    site = headers.get("sec-fetch-site")
    if site not in (None, "same-origin", "none"):
        return f"cross-site requests are refused (Sec-Fetch-Site: {site})"
    host = headers.get("host", "").lower()
    for header in ("origin", "referer"):
        value = headers.get(header)
        if value:
            if value == "null" or urlsplit(value).netloc.lower() != host:
                return f"cross-origin requests are refused ({header.title()}: {_origin_of(value) if value != 'null' else 'null'})"
            return None
    return None


class OriginGuard:
    """ASGI middleware applying the rules above; it only acts when the cluster has no token."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str], allowed_origins: Iterable[str]) -> None:
        self.app = app
        self.allowed_hosts = [h for h in allowed_hosts if h]
        self.allowed_origins = list(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        error: str | None = None
        if not host_allowed(headers.get("host", ""), self.allowed_hosts):
            # Do not echo the name back: a refusal page is all a rebinding attacker gets.
            error = "this server only answers to its loopback names and MILLSTREAM_ALLOWED_HOSTS"
        elif scope.get("method") in MUTATING:
            error = cross_site_reason(headers, self.allowed_origins)
        if error is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await JSONResponse({"errors": [error]}, status_code=403)(scope, receive, send)
