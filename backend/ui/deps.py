"""FastAPI dependencies of the dashboard, as named ``Annotated`` aliases."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from backend.ui.throughput import ThroughputHistory, ensure_sampler


def get_history(request: Request) -> ThroughputHistory:
    # The sampler starts with the first dashboard request: install_ui runs before the
    # app's lifespan has created the Dispatcher, so it cannot be started earlier.
    ensure_sampler(request.app)
    return request.app.state.ui_throughput


HistoryDep = Annotated[ThroughputHistory, Depends(get_history)]
