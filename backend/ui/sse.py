"""Server-sent event streams for live fragments.

Each stream re-renders its fragments every interval and sends each as a named
event; it sends ``close`` and ends once its subject has ended, so the htmx SSE
extension (``sse-close="close"``) stops listening instead of reconnecting.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from fastapi import Request
from sse_starlette.sse import EventSourceResponse
from starlette.concurrency import run_in_threadpool

# (events to send, whether the subject is finished) - computed off the event loop
Produce = Callable[[], tuple[list[tuple[str, str]], bool]]


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
