"""The header badge naming the leading JobManager (high availability, issue 18).

A context processor: every dashboard page gets ``jobmanager_leader``, None without high
availability (one JobManager: nothing to tell apart), else this JobManager's role and the leader's
address, so a page served by a standby says so and links to the leader's dashboard. A page the
leader rendered for a request a standby relayed (backend/leader_forwarding.py) says that it is the
leader's live view, seen through that standby.
"""
from __future__ import annotations

from typing import Any

import redis
from starlette.requests import Request


def leader_context(request: Request) -> dict[str, Any]:
    leadership = getattr(request.app.state, "leadership", None)
    if leadership is None or not getattr(leadership, "high_availability", False):
        return {"jobmanager_leader": None}
    try:
        info = leadership.info()
    except redis.RedisError:
        info = {"address": None, "role": "unknown", "self": leadership.address}
    # Set by a relaying standby (a caller could set it too: it only changes these words, escaped).
    via = request.headers.get("x-millstream-forwarded")
    return {"jobmanager_leader": {"role": info["role"], "leader": info["address"], "self": info["self"], "via": via}}
