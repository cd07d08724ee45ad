"""DataServerMonitor: the leading JobManager's watch over the data Redis servers (MILLSTREAM_DATA_REDIS_URLS).

A thread PINGs each server every ``interval_ms`` with a bounded timeout and keeps, per server, whether
it answered, since when, and the last error. A change (down, or back) is logged once. The Dispatcher
reads the states for REST (``/cluster/data-servers``), Prometheus and the dashboard, and holds the
restart of a job whose next attempt would put channels on a server that is down (job_master.py).

``DataServerHealth`` is the bookkeeping without I/O; the thread only feeds it PING results.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import redis

log = logging.getLogger("millstream.dataservers")

DEFAULT_INTERVAL_MS = 2000
PING_TIMEOUT_S = 1.0  # a server slower than this to answer a PING is as good as down for the data plane


class ServerStatus:
    UP = "UP"
    DOWN = "DOWN"
    UNKNOWN = "UNKNOWN"  # not checked yet (or no leader checks it)


@dataclass(frozen=True)
class DataServerState:
    index: int
    address: str  # host:port/db, no password
    status: str = ServerStatus.UNKNOWN
    since_ms: int | None = None  # when it entered this status (as first seen)
    last_check_ms: int | None = None
    latency_ms: float | None = None  # of the last PING that was answered
    error: str | None = None  # why the last PING failed, while DOWN

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index, "address": self.address, "status": self.status, "since": self.since_ms,
            "lastCheck": self.last_check_ms, "latencyMs": self.latency_ms, "error": self.error,
        }


class DataServerHealth:
    """Each server's latest status from PING results; says which observations changed a status."""

    def __init__(self, addresses: Sequence[str]) -> None:
        self._states = [DataServerState(i, a) for i, a in enumerate(addresses)]

    def observe(self, index: int, now_ms: int, latency_ms: float | None, error: str | None = None) -> str | None:
        """Record one PING (``error`` None: answered). Returns the new status when it is worth a log
        line: DOWN when it went down (or was down at the first check), UP when it came back; else None."""
        old = self._states[index]
        status = ServerStatus.UP if error is None else ServerStatus.DOWN
        changed = status != old.status
        self._states[index] = replace(
            old, status=status, since_ms=now_ms if changed else old.since_ms, last_check_ms=now_ms,
            latency_ms=latency_ms if error is None else old.latency_ms, error=error,
        )
        if not changed or (status == ServerStatus.UP and old.status == ServerStatus.UNKNOWN):
            return None
        return status

    def states(self) -> list[DataServerState]:
        return list(self._states)

    def down(self) -> set[int]:
        return {s.index for s in self._states if s.status == ServerStatus.DOWN}


class DataServerMonitor:
    """The thread that PINGs the data servers. ``clients`` are its own (short timeouts), one per server."""

    def __init__(
        self, clients: Sequence[redis.Redis], addresses: Sequence[str], interval_ms: int = DEFAULT_INTERVAL_MS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clients = list(clients)
        self.interval_ms = interval_ms
        self.health = DataServerHealth(addresses)
        self.clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def for_urls(urls: Sequence[str], addresses: Sequence[str], interval_ms: int = DEFAULT_INTERVAL_MS) -> "DataServerMonitor":
        clients = [
            redis.Redis.from_url(u, socket_connect_timeout=PING_TIMEOUT_S, socket_timeout=PING_TIMEOUT_S) for u in urls
        ]
        return DataServerMonitor(clients, addresses, interval_ms)

    def start(self) -> None:
        self.check_all()  # a status before the first REST read, and before any restart is decided
        self._thread = threading.Thread(target=self._run, name="data-server-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(PING_TIMEOUT_S * 2 * max(len(self.clients), 1) + 1)
        for c in self.clients:
            c.close()

    def check_soon(self) -> None:
        """Check now rather than at the next interval: a task failed, perhaps because a server died, and
        its job's restart (after its backoff) should know before it deploys."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_ms / 1000)
            self._wake.clear()
            if not self._stop.is_set():
                self.check_all()

    def check_all(self) -> None:
        for i, client in enumerate(self.clients):
            if self._stop.is_set():
                return
            began = time.monotonic()
            try:
                client.ping()
                latency, error = (time.monotonic() - began) * 1000, None
            except (redis.AuthenticationError, redis.exceptions.AuthorizationError) as e:
                latency, error = None, f"refused: {e}"  # answering, but not to us: as useless as down
            except (redis.RedisError, OSError) as e:
                latency, error = None, str(e) or type(e).__name__
            with self._lock:
                change = self.health.observe(i, int(self.clock() * 1000), latency, error)
                address = self.health.states()[i].address
            if change == ServerStatus.DOWN:
                log.warning("data server %d (%s) is down: %s", i, address, error)
            elif change == ServerStatus.UP:
                log.warning("data server %d (%s) is back", i, address)

    def states(self) -> list[DataServerState]:
        with self._lock:
            return self.health.states()

    def down(self) -> set[int]:
        with self._lock:
            return self.health.down()
