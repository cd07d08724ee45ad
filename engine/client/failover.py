"""A REST client for several JobManager addresses: the next is tried when one cannot be reached.

With high availability (issue 18) any JobManager answers REST (a standby forwards to the leader), so
the client only needs one that is up. ``-m http://a:8081,http://b:8082`` keeps working when the
JobManager it was talking to dies: the request that failed to connect goes to the next address, and
later requests start from the one that answered. An address may be given as Flink's ``-m`` takes it,
``host:port``, without a scheme.
"""
from __future__ import annotations

import threading
from typing import Any

import httpx


class BadAddress(ValueError):
    """A JobManager address that cannot be an HTTP URL (the message names it)."""


def normalize_address(address: str) -> str:
    """``host:port`` (Flink's ``-m`` form) or ``http(s)://host[:port]``, as a base URL without a
    trailing slash; anything else raises :class:`BadAddress` naming it."""
    address = address.strip().rstrip("/")
    if "://" not in address:
        address = "http://" + address  # Flink's -m takes host:port
    try:
        url = httpx.URL(address)
    except (httpx.InvalidURL, ValueError) as e:
        raise BadAddress(f"'{address}' is not a JobManager address: {e}") from None
    if url.scheme not in ("http", "https"):
        raise BadAddress(f"'{address}' is not a JobManager address: the scheme must be http or https")
    if not url.host:
        raise BadAddress(f"'{address}' is not a JobManager address: it names no host (use host:port)")
    if url.path not in ("", "/") or url.query:
        raise BadAddress(f"'{address}' is not a JobManager address: give host:port only, without a path")
    return address


def split_addresses(addresses: str) -> list[str]:
    found = [normalize_address(a) for a in addresses.split(",") if a.strip()]
    if not found:
        raise BadAddress("no JobManager address given")
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

    @property
    def current(self) -> str:
        """The address that answered last (where the dashboard of this client's jobs is)."""
        with self._lock:
            return str(self.addresses[self._current]).rstrip("/")


class JobManagerClient(httpx.Client):
    """An ``httpx.Client`` for one JobManager address, or for several tried in turn."""

    def __init__(self, addresses: list[str], **kwargs: Any) -> None:
        self._failover = FailoverTransport(addresses) if len(addresses) > 1 else None
        if self._failover is not None:
            kwargs["transport"] = self._failover
        super().__init__(base_url=addresses[0], **kwargs)

    @property
    def current_address(self) -> str:
        """The address that answered last (where the dashboard of this client's jobs is)."""
        return self._failover.current if self._failover is not None else str(self.base_url).rstrip("/")


def failover_client(addresses: str, **kwargs: Any) -> JobManagerClient:
    """A client for ``addresses`` (comma-separated; ``host:port`` or URLs); raises :class:`BadAddress`."""
    return JobManagerClient(split_addresses(addresses), **kwargs)
