"""Control messages between the JobManager and TaskManagers, as msgpack dicts on Redis lists.

A control message is sealed with the cluster secret for the inbox it is pushed to (``seal``) and
opened by the inbox's reader (``open_message``) before it is decoded: a message pushed by someone
who only has the Redis URL (a forged deploy, cancel or task_state), or replayed into another inbox,
raises ``Unauthenticated``; receivers drop it (logged and counted by engine/security/mac.py).
Messages carry their job and attempt inside the sealed body. ``pack``/``unpack`` stay for the
display-only values in Redis (metrics samples, TaskManager info) that change no job.
"""
from __future__ import annotations

from typing import Any

import msgpack

from engine.security.mac import Sealer, Unauthenticated

__all__ = ["Unauthenticated"]  # receivers catch it from here


def pack(msg: dict[str, Any]) -> bytes:
    return msgpack.packb(msg, use_bin_type=True)


def unpack(data: bytes) -> dict[str, Any]:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def seal(msg: dict[str, Any], secret: str | bytes | None, inbox: str) -> bytes:
    """``msg`` packed and sealed for the Redis list ``inbox``."""
    return Sealer(secret, "control", inbox).seal(pack(msg))


def open_message(data: bytes, secret: str | bytes | None, inbox: str) -> dict[str, Any]:
    """The message sealed for ``inbox`` in ``data``; raises Unauthenticated before decoding anything else."""
    msg = unpack(Sealer(secret, "control", inbox).open(data))
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise Unauthenticated(f"a control message in {inbox} is not a typed message")
    return msg


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


def trigger_checkpoint(job: str, attempt: int, vertex: str, subtask: int, barrier: tuple) -> dict[str, Any]:
    return {"type": "trigger_checkpoint", "job": job, "attempt": attempt, "vertex": vertex, "subtask": subtask, "barrier": list(barrier)}


def notify_checkpoint_complete(job: str, attempt: int, checkpoint_id: int) -> dict[str, Any]:
    return {"type": "notify_checkpoint_complete", "job": job, "attempt": attempt, "checkpoint_id": checkpoint_id}


def notify_checkpoint_aborted(job: str, attempt: int, checkpoint_id: int, reason: str | None = None) -> dict[str, Any]:
    """Checkpoint ``checkpoint_id`` will never complete: tasks stop aligning it, and a source stopped by
    that stop-with-savepoint resumes reading."""
    return {"type": "notify_checkpoint_aborted", "job": job, "attempt": attempt, "checkpoint_id": checkpoint_id, "reason": reason}


def checkpoint_ack(job: str, attempt: int, vertex: str, subtask: int, checkpoint_id: int, ack: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "checkpoint_ack", "job": job, "attempt": attempt, "vertex": vertex, "subtask": subtask,
        "checkpoint_id": checkpoint_id, "ack": ack,
    }


def checkpoint_decline(
    job: str, attempt: int, vertex: str, subtask: int, checkpoint_id: int, reason: str, not_ready: bool = False
) -> dict[str, Any]:
    return {
        "type": "checkpoint_decline", "job": job, "attempt": attempt, "vertex": vertex, "subtask": subtask,
        "checkpoint_id": checkpoint_id, "reason": reason, "not_ready": not_ready,
    }
