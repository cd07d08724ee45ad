"""A REST client for several JobManager addresses: the next is tried when one cannot be reached.

With high availability (issue 18) any JobManager answers REST (a standby forwards to the leader), so
the client only needs one that is up. ``-m http://a:8081,http://b:8082`` keeps working when the
JobManager it was talking to dies: the request that failed to connect goes to the next address, and
later requests start from the one that answered.
"""
from __future__ import annotations

import threading
from typing import Any

import httpx


def split_addresses(addresses: str) -> list[str]:
    found = [a.strip().rstrip("/") for a in addresses.split(",") if a.strip()]
    if not found:
        raise ValueError("no JobManager address given")
    return found


class FailoverTransport(httpx.BaseTransport):
    """Sends each request to the address that last answered; on a connection failure, to the next."""

    def __init__(self, addresses: list[str], transport: httpx.BaseTransport | None = None) -> None:
        self.addresses = [httpx.URL(a) for a in addresses]
        self._inner = transport or httpx.HTTPTransport()
        self._current = 0
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            start = self._current
        last: Exception | None = None
        for step in range(len(self.addresses)):
            index = (start + step) % len(self.addresses)
            target = self.addresses[index]
            request.url = request.url.copy_with(scheme=target.scheme, host=target.host, port=target.port)
            request.headers["host"] = target.netloc.decode("ascii")
            try:
                response = self._inner.handle_request(request)
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                last = e  # nothing was sent: safe to try the next JobManager, even for a POST
                continue
            with self._lock:
                self._current = index
            return response
        assert last is not None
        raise last

    def close(self) -> None:
        self._inner.close()


def failover_client(addresses: str, **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` for one address, or for several tried in turn."""
    found = split_addresses(addresses)
    if len(found) == 1:
        return httpx.Client(base_url=found[0], **kwargs)
    return httpx.Client(base_url=found[0], transport=FailoverTransport(found), **kwargs)
