"""Control messages between the JobManager and TaskManagers, as msgpack dicts on Redis lists."""
from __future__ import annotations

from typing import Any

import msgpack


def pack(msg: dict[str, Any]) -> bytes:
    return msgpack.packb(msg, use_bin_type=True)


def unpack(data: bytes) -> dict[str, Any]:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def task_state(
    job: str,
    vertex: str,
    subtask: int,
    attempt: int,
    state: str,
    tm: str,
    slot: int,
    ts: int,
    error: str | None = None,
    exception_name: str | None = None,
) -> dict[str, Any]:
    return {
        "type": "task_state",
        "job": job,
        "vertex": vertex,
        "subtask": subtask,
        "attempt": attempt,
        "state": state,
        "tm": tm,
        "slot": slot,
        "ts": ts,
        "error": error,
        "exception_name": exception_name,
    }


def deploy(tdd: dict[str, Any]) -> dict[str, Any]:
    return {"type": "deploy", "tdd": tdd}


def cancel(job: str, attempt: int) -> dict[str, Any]:
    return {"type": "cancel", "job": job, "attempt": attempt}


def slot_lost(tm: str, slot: int, ts: int, reason: str) -> dict[str, Any]:
    return {"type": "slot_lost", "tm": tm, "slot": slot, "ts": ts, "reason": reason}
