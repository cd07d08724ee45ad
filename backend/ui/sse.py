"""Server-sent event streams for live fragments.

Each stream re-renders its fragments every interval and sends each as a named
event; it sends ``close`` and ends once its subject has ended, so the htmx SSE
extension (``sse-close="close"``) stops listening instead of reconnecting.
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Hashable

from fastapi import Request
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool

# (events to send, whether the subject is finished) - computed off the event loop
Produce = Callable[[], tuple[list[tuple[str, str]], bool]]


class SharedTicks:
    """One render per subject per tick, however many viewers stream it: the first
    stream to ask renders, the others reuse that result while it is younger than
    ``max_age_s``. Ten open dashboards on a running job then cost the JobManager
    (which shares the machine with the job) about what one does."""

    def __init__(self, max_age_s: float = 0.9, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age_s = max_age_s
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, tuple[list[tuple[str, str]], bool]]] = {}
        self._key_locks: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, produce: Produce) -> tuple[list[tuple[str, str]], bool]:
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # concurrent viewers wait for the one render instead of repeating it
            now = self.clock()
            hit = self._entries.get(key)
            if hit is not None and now - hit[0] < self.max_age_s:
                return hit[1]
            result = produce()
            with self._lock:
                self._entries[key] = (self.clock(), result)
                for k in [k for k, (t, _) in self._entries.items() if now - t > 10 * self.max_age_s]:
                    del self._entries[k]
                    self._key_locks.pop(k, None)
            return result


def stream(request: Request, produce: Produce, interval_s: float = 1.0) -> EventSourceResponse:
    async def events() -> AsyncIterator[dict[str, str]]:
        while True:
            try:
                batch, done = await run_in_threadpool(produce)
            except Exception as e:  # noqa: BLE001 - e.g. the job vanished; tell the page and stop
                yield {"event": "close", "data": str(e)}
                return
            for name, data in batch:
                yield {"event": name, "data": data}
            if done:
                yield {"event": "close", "data": "ended"}
                return
            for _ in range(int(interval_s * 10)):
                if await request.is_disconnected():
                    return
                await asyncio.sleep(0.1)

    # no-cache + no buffering so proxies pass each event through at once
    return EventSourceResponse(events(), ping=15, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
