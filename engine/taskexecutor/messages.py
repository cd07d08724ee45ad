"""Control messages between the JobManager and TaskManagers, as msgpack dicts on Redis lists.

A control message is sealed with the cluster secret for the inbox it is pushed to (``seal``) and
opened by the inbox's reader (``open_message``) before it is decoded: a message pushed by someone
who only has the Redis URL (a forged deploy, cancel or task_state), or replayed into another inbox,
raises ``Unauthenticated``; receivers drop it (logged and counted by engine/security/mac.py).
Messages carry their job and attempt inside the sealed body, and a ``nonce`` (sender id, sequence
number, time: engine/security/replay.py) so that a genuine message copied and pushed again is refused
by the receiver's ``ReplayWindow`` instead of acting twice.

What TaskManagers and slots report into Redis keys rather than inboxes (registration, heartbeats,
task and TaskManager metrics) is sealed too (``seal_report``/``open_report``), bound to the key and
field it is stored under: the JobManager schedules on registrations, detects failures by heartbeats
and picks attempt numbers from metrics, so a value written by someone else must not count.
"""
from __future__ import annotations

from typing import Any

import msgpack

from millstream.engine import redis_keys
from millstream.engine.security.mac import Part, Sealer, Unauthenticated
from millstream.engine.security.replay import ReplayWindow, stamp

__all__ = ["Unauthenticated"]  # receivers catch it from here


def pack(msg: dict[str, Any]) -> bytes:
    return msgpack.packb(msg, use_bin_type=True)


def unpack(data: bytes) -> dict[str, Any]:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def seal(msg: dict[str, Any], secret: str | bytes | None, inbox: str, epoch: int | None = None) -> bytes:
    """``msg`` packed and sealed for the Redis list ``inbox``, with a fresh nonce, and for the
    receiver's ``epoch`` when given (the JobManager's inbox demands the epoch it runs in)."""
    body = {**msg, "nonce": list(stamp())}
    if epoch is not None:
        body["epoch"] = epoch
    return Sealer(secret, "control", inbox).seal(pack(body))


def open_message(
    data: bytes, secret: str | bytes | None, inbox: str, replay: ReplayWindow | None = None
) -> dict[str, Any]:
    """The message sealed for ``inbox`` in ``data``; raises Unauthenticated before decoding anything else,
    and (given the inbox's ``replay`` window) ReplayError for a message accepted before."""
    msg = unpack(Sealer(secret, "control", inbox).open(data))
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise Unauthenticated(f"a control message in {inbox} is not a typed message")
    if replay is not None:
        nonce = msg.get("nonce")
        replay.check(*(nonce if isinstance(nonce, list) and len(nonce) == 3 else (None, None, None)))
        replay.check_epoch(msg.get("epoch"))
    return msg


def publish_epoch(client: Any, secret: str | bytes | None, epoch: int) -> None:
    """Tell the cluster the epoch the JobManager's inbox demands now (sealed: only a JobManager sets it;
    an older value put back only makes the messages sealed with it refused)."""
    client.set(redis_keys.JOBMANAGER_EPOCH, seal_report({"epoch": epoch}, secret, "jm-epoch", redis_keys.JOBMANAGER_EPOCH))


def current_epoch(client: Any, secret: str | bytes | None) -> int | None:
    """The epoch last published by a JobManager, or None (none published, or not sealed by one)."""
    value = open_report(client.get(redis_keys.JOBMANAGER_EPOCH), secret, "jm-epoch", redis_keys.JOBMANAGER_EPOCH)
    epoch = value.get("epoch") if value else None
    return epoch if isinstance(epoch, int) else None


def seal_report(value: dict[str, Any], secret: str | bytes | None, kind: str, *where: Part) -> bytes:
    """A report (``kind``: registration, heartbeat, metrics) packed and sealed for the key/field ``where``."""
    return Sealer(secret, kind, *where).seal(pack(value))


def open_report(data: bytes | None, secret: str | bytes | None, kind: str, *where: Part) -> dict[str, Any] | None:
    """The report sealed in ``data`` for ``where``, or None (logged and counted) if it is missing, was
    not sealed by this cluster for that place, or is not a map: such a value counts as absent."""
    if data is None:
        return None
    try:
        value = unpack(Sealer(secret, kind, *where).open(data))
    except Unauthenticated:
        return None
    return value if isinstance(value, dict) else None


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


def report_tasks(request: str) -> dict[str, Any]:
    """A JobManager that took over (or restarted) asks each slot what it runs; the slot answers with a
    ``task_offer`` report into ``redis_keys.task_offers(request)`` (Flink's TaskExecutor offering its
    slots to a new JobMaster), and from then on seals its reports for that JobManager's epoch."""
    return {"type": "report_tasks", "request": request}


def task_offer(
    tm: str, slot: int, pid: int, tasks: list[dict[str, Any]], checkpoints: list[list[Any]]
) -> dict[str, Any]:
    """A slot's answer to ``report_tasks``: ``tasks`` holds one ``{job, vertex, subtask, attempt, state}``
    per task it runs and per task that ended there (its final state: a FINISHED report sent while no
    JobManager led reached nobody), ``checkpoints`` one ``[job, attempt, id]`` per job attempt: the highest checkpoint
    id its tasks were triggered with or acknowledged, so the new coordinator never hands out one again."""
    return {"type": "task_offer", "tm": tm, "slot": slot, "pid": pid, "tasks": tasks, "checkpoints": checkpoints}


def trigger_checkpoint(job: str, attempt: int, vertex: str, subtask: int, barrier: tuple) -> dict[str, Any]:
    return {"type": "trigger_checkpoint", "job": job, "attempt": attempt, "vertex": vertex, "subtask": subtask, "barrier": list(barrier)}


def notify_checkpoint_complete(job: str, attempt: int, checkpoint_id: int) -> dict[str, Any]:
    return {"type": "notify_checkpoint_complete", "job": job, "attempt": attempt, "checkpoint_id": checkpoint_id}


def notify_checkpoint_aborted(job: str, attempt: int, checkpoint_id: int, reason: str | None = None) -> dict[str, Any]:
    """Checkpoint ``checkpoint_id`` will never complete: tasks stop aligning it, and a source stopped by
    that stop-with-savepoint resumes reading."""
    return {"type": "notify_checkpoint_aborted", "job": job, "attempt": attempt, "checkpoint_id": checkpoint_id, "reason": reason}


def request_stack_samples(
    job: str, attempt: int, vertex: str, request: str, num_samples: int, delay_ms: int
) -> dict[str, Any]:
    """Sample the task threads of ``vertex``'s subtasks in the slot (engine/taskexecutor/stack_sampler.py)
    and answer into ``redis_keys.stack_samples(request)``, one sealed field per subtask."""
    return {
        "type": "request_stack_samples", "job": job, "attempt": attempt, "vertex": vertex, "request": request,
        "num_samples": num_samples, "delay_ms": delay_ms,
    }


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
