"""FastAPI dependencies of the dashboard, as named ``Annotated`` aliases."""
from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from millstream.backend.ui.throughput import ThroughputHistory


def get_history(request: Request) -> ThroughputHistory:
    return request.app.state.ui_throughput


HistoryDep = Annotated[ThroughputHistory, Depends(get_history)]
