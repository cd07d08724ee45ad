"""The live web dashboard under ``/ui/``: server-rendered pages (Jinja2 + htmx) whose
fragments update over server-sent events.

``install_ui(app)`` mounts the static files, the dashboard routers and the
``/`` redirect; it is safe to call more than once.
"""
from __future__ import annotations

import threading
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from millstream.backend.ui.templating import STATIC_DIR
from millstream.backend.ui.throughput import ThroughputHistory, start_sampler


def install_ui(app: FastAPI) -> None:
    if getattr(app.state, "ui_installed", False):
        return
    app.state.ui_installed = True
    app.state.ui_throughput = ThroughputHistory()
    _run_sampler_with_app(app)

    from millstream.backend.ui.routes import actions, audit, job, pages, savepoints, submit

    app.mount("/ui/static", StaticFiles(directory=str(STATIC_DIR)), name="ui-static")
    for module in (pages, savepoints, job, actions, submit, audit):
        app.include_router(module.router)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/", status_code=307)


def _run_sampler_with_app(app: FastAPI) -> None:
    """Wraps the app's lifespan: the throughput sampler needs the Dispatcher, which only
    exists once create_app's lifespan has started, and must stop before it stops."""
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            stop = threading.Event()
            thread = start_sampler(a.state, stop)
            try:
                yield state
            finally:
                stop.set()
                thread.join(5)

    app.router.lifespan_context = lifespan
