"""A TaskManager's own Prometheus endpoint (Flink's PrometheusReporter on a TaskManager).

Slot processes send each subtask's metrics sample to their TaskManager over a local pipe, once per
metrics interval (the same sample they publish to Redis for the JobManager). The TaskManager keeps
the latest per subtask in a ``TaskMetricsStore``; a scrape of ``GET /metrics`` turns the store into
Flink-named families at that moment (engine/metrics/prometheus_reporter.py). Nothing is pushed.
"""
from __future__ import annotations

import hmac
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection, wait
from collections.abc import Mapping
from typing import Any, Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from millstream.engine.metrics.prometheus_reporter import task_families
from millstream.engine.metrics.task_report import decode_reports

log = logging.getLogger("millstream.taskmanager.metrics")

#: A subtask not reported for this long is gone (its slot died before it could say so).
STALE_AFTER_S = 15.0
#: The largest report a slot may send at once (every subtask of the slot, user metrics included).
MAX_REPORT_BYTES = 16 * 1024 * 1024


class TaskMetricsStore:
    """The latest report of every subtask running on this TaskManager, by slot."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._latest: dict[tuple[str, str, int], tuple[int, float, TaskMetricsReport]] = {}

    def update(self, slot: int, reports: list[TaskMetricsReport]) -> None:
        now = self._clock()
        with self._lock:
            for r in reports:
                if r.ended:
                    current = self._latest.get(r.key)
                    if current is not None and current[2].attempt <= r.attempt:
                        del self._latest[r.key]
                else:
                    self._latest[r.key] = (slot, now, r)

    def drop_slot(self, slot: int) -> None:
        """A slot process died: its subtasks' metrics go with it."""
        with self._lock:
            self._latest = {k: v for k, v in self._latest.items() if v[0] != slot}

    def reports(self) -> list[TaskMetricsReport]:
        cutoff = self._clock() - STALE_AFTER_S
        with self._lock:
            self._latest = {k: v for k, v in self._latest.items() if v[1] >= cutoff}
            return [v[2] for v in self._latest.values()]


class TaskManagerCollector(Collector):
    """Collects at scrape time from the store, and the TaskManager's own figures from ``status``
    (what its last heartbeat sent: measuring CPU again here would disturb that measurement)."""

    def __init__(
        self, store: TaskMetricsStore, tm_id: str, host: str, status: Callable[[], Mapping[str, Any]] = dict
    ) -> None:
        self.store, self.tm_id, self.host, self.status = store, tm_id, host, status

    def collect(self):  # type: ignore[no-untyped-def]
        yield from task_families(self.store.reports(), self.tm_id, self.host, self.status())


class SlotMetricsReceiver:
    """Reads the slot processes' pipes on one thread into the store."""

    def __init__(self, store: TaskMetricsStore, stopping: threading.Event) -> None:
        self.store = store
        self.stopping = stopping
        self._lock = threading.Lock()
        self._pipes: dict[Connection, int] = {}

    def add(self, slot: int, conn: Connection) -> None:
        with self._lock:
            self._pipes[conn] = slot

    def remove_slot(self, slot: int) -> None:
        with self._lock:
            for conn in [c for c, s in self._pipes.items() if s == slot]:
                del self._pipes[conn]
                conn.close()
        self.store.drop_slot(slot)

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self._read_once()
            except Exception:  # never dies: the endpoint would go stale for good
                log.exception("reading the slots' metrics failed")
                self.stopping.wait(0.5)

    def _read_once(self) -> None:
        """Wait up to half a second for reports and store what came."""
        with self._lock:
            pipes = dict(self._pipes)
        if not pipes:
            self.stopping.wait(0.5)
            return
        try:
            ready = wait(list(pipes), timeout=0.5)
        except (OSError, ValueError):  # a pipe was closed under us (its slot restarted): look again
            return
        for conn in ready:
            slot = pipes[conn]  # type: ignore[index]
            try:
                reports = decode_reports(conn.recv_bytes(MAX_REPORT_BYTES))  # type: ignore[union-attr]
            except (EOFError, OSError):  # the slot is gone (or sent too much); its restart brings a new pipe
                with self._lock:
                    self._pipes.pop(conn, None)  # type: ignore[call-overload]
                continue
            except ValueError:  # unreadable: dropped, the endpoint keeps serving
                log.warning("unreadable metrics report from slot %s", slot, exc_info=True)
                continue
            self.store.update(slot, reports)

    def start(self) -> None:
        threading.Thread(target=self.run, name="slot-metrics", daemon=True).start()


def bearer_matches(header: str | None, token: str) -> bool:
    """``Authorization: Bearer <token>``, the scheme case-insensitive, the token compared in constant
    time (the REST API's check, backend/bearer_auth.py; the engine does not import the backend)."""
    scheme, _, given = (header or "").strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


class MetricsServer:
    """``GET /metrics`` on ``(bind, port)``; port 0 picks a free one, ``port`` is the one bound.
    With ``token``, a scrape needs ``Authorization: Bearer <token>`` (the REST API's read token)."""

    def __init__(self, collector: Collector, bind: str, port: int, token: str | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.token = token
        self.httpd = ThreadingHTTPServer((bind, port), self._make_handler())
        self.httpd.daemon_threads = True
        self.port: int = self.httpd.server_address[1]

    def _make_handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.split("?", 1)[0] != "/metrics":
                    self._answer(404, b"not found: the metrics are at /metrics\n", "text/plain")
                    return
                if server.token is not None and not bearer_matches(self.headers.get("Authorization"), server.token):
                    self._answer(401, b"a valid 'Authorization: Bearer <token>' header is required\n", "text/plain")
                    return
                try:
                    body = generate_latest(server.registry)
                except Exception:  # a scrape never takes the TaskManager down
                    log.exception("metrics scrape failed")
                    self._answer(500, b"the metrics could not be collected\n", "text/plain")
                    return
                self._answer(200, body, CONTENT_TYPE_LATEST)

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                if status == 401:
                    self.send_header("WWW-Authenticate", "Bearer")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass  # a scrape every few seconds is not worth a log line

        return Handler

    def start(self) -> None:
        threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
