"""Request size limit: an ASGI middleware answering 413 for bodies over ``max_request_bytes``.

A declared ``Content-Length`` is checked before the app runs. Without one
(chunked uploads) the bytes are counted as the app reads them; once over the
limit the app's own answer is dropped and 413 is sent instead.
"""
from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class _TooLarge(Exception):
    pass


class RequestSizeLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared == -1:
            await _answer(send, 400, "the Content-Length header is not a number")
            return
        if declared is not None and declared > self.max_bytes:
            await _answer(send, 413, self._message())
            return

        state: dict[str, Any] = {"received": 0, "exceeded": False, "started": False}

        async def counting_receive() -> Message:
            msg = await receive()
            if msg["type"] == "http.request":
                state["received"] += len(msg.get("body", b""))
                if state["received"] > self.max_bytes:
                    state["exceeded"] = True
                    raise _TooLarge()
            return msg

        async def guarded_send(msg: Message) -> None:
            if state["exceeded"]:
                return  # whatever the app makes of the broken body, the answer is 413
            if msg["type"] == "http.response.start":
                state["started"] = True
            await send(msg)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not state["exceeded"]:
                raise
        if state["exceeded"] and not state["started"]:
            await _answer(send, 413, self._message())

    def _message(self) -> str:
        return f"the request body exceeds the limit of {self.max_bytes} bytes (max_request_bytes)"


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                n = int(value)
            except ValueError:
                return -1
            return n if n >= 0 else -1
    return None


async def _answer(send: Send, status: int, message: str) -> None:
    body = json.dumps({"errors": [message]}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
