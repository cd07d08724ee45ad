"""``GET /jobmanager/leader``: which JobManager leads, since when, and which stand by (issue 18).

Every JobManager answers it itself (never forwarded), from the lease in Redis.
"""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from typing_extensions import TypedDict

router = APIRouter(tags=["cluster"])

LeaderInfo = TypedDict(
    "LeaderInfo",
    {
        "address": "str | None",
        "leaderSince": "int | None",
        "standbys": list[str],
        "self": str,
        "role": str,
        "fencingToken": "int | None",
    },
)


@router.get("/jobmanager/leader", summary="The leading JobManager, since when (epoch ms), and the standbys")
def leader(request: Request) -> LeaderInfo:
    leadership = request.app.state.leadership
    if leadership is None:
        raise HTTPException(503, "the JobManager is starting")
    return leadership.info()
