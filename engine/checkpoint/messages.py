"""What the coordinator and the tasks say to each other about a checkpoint, as plain values.

The coordinator never sends anything itself: it returns these actions and the
caller (the JobMaster) carries them out. Each has ``to_dict``/``from_dict`` so
it can travel as a control message.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Mapping

from millstream.engine.checkpoint.config import CheckpointingMode

TaskId = tuple[str, int]  # (job vertex id, subtask index)

StateHandle = Any  # a path written by CheckpointStorage, or a small JSON-able dict


class CheckpointType(str, Enum):
    """Flink's checkpoint_type values in REST answers."""

    CHECKPOINT = "CHECKPOINT"
    SAVEPOINT = "SAVEPOINT"
    SYNC_SAVEPOINT = "SYNC_SAVEPOINT"  # stop-with-savepoint: the job ends after it completes

    def is_savepoint(self) -> bool:
        return self is not CheckpointType.CHECKPOINT


def task_id(vertex_id: str, subtask: int) -> TaskId:
    return (str(vertex_id), int(subtask))


@dataclass(frozen=True)
class TaskAck:
    """A subtask's acknowledgement of one checkpoint (Flink's AcknowledgeCheckpoint with its metrics)."""

    state_handles: Mapping[str, StateHandle] = field(default_factory=dict)  # operator id -> handle
    state_size: int = 0
    checkpointed_size: int | None = None  # None: a full snapshot, the same as state_size
    sync_ms: int = 0
    async_ms: int = 0
    alignment_ms: int = 0
    alignment_buffered_bytes: int = 0
    processed_bytes: int = 0
    persisted_bytes: int = 0
    start_delay_ms: int = 0
    ack_timestamp: int | None = None  # None: the time the coordinator received it
    source_offsets: Mapping[str, Any] = field(default_factory=dict)  # operator id -> reader position
    # Incremental checkpoints: operator id -> names of the files under the job's ``shared/`` directory
    # its state refers to (the chain: a base and the deltas after it), reference-counted by the
    # coordinator's SharedStateRegistry.
    shared_files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def incremental_size(self) -> int:
        return self.state_size if self.checkpointed_size is None else self.checkpointed_size

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["state_handles"] = dict(self.state_handles)
        d["source_offsets"] = dict(self.source_offsets)
        d["shared_files"] = {op: list(names) for op, names in self.shared_files.items()}
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "TaskAck":
        d = dict(d)
        d["shared_files"] = {str(op): tuple(names) for op, names in (d.get("shared_files") or {}).items()}
        return TaskAck(**d)


@dataclass(frozen=True)
class TriggerAction:
    """Send checkpoint ``checkpoint_id`` to every task in ``tasks`` (the sources); they emit barriers."""

    job_id: str
    checkpoint_id: int
    checkpoint_type: CheckpointType
    timestamp: int
    tasks: tuple[TaskId, ...]
    mode: CheckpointingMode
    location: str | None  # where tasks write their state, or None without durable storage
    request_id: str | None = None
    drain: bool = False  # stop-with-savepoint: advance to the end of event time first
    duplicate: bool = False  # a retried request: already triggered, send nothing again

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "checkpoint_id": self.checkpoint_id,
            "checkpoint_type": self.checkpoint_type.value,
            "timestamp": self.timestamp,
            "mode": self.mode.value,
            "location": self.location,
            "drain": self.drain,
        }


@dataclass(frozen=True)
class NotifyCompleteAction:
    """Tell every task that checkpoint ``checkpoint_id`` is complete: the commit point for 2PC sinks."""

    job_id: str
    checkpoint_id: int
    tasks: tuple[TaskId, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "checkpoint_id": self.checkpoint_id}


@dataclass(frozen=True)
class NotifyAbortedAction:
    """Tell every task that checkpoint ``checkpoint_id`` will never complete: stop aligning, drop its state."""

    job_id: str
    checkpoint_id: int
    tasks: tuple[TaskId, ...]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "checkpoint_id": self.checkpoint_id, "reason": self.reason}


@dataclass(frozen=True)
class DiscardAction:
    """Delete the data of checkpoint ``checkpoint_id`` at ``location`` (and mark it discarded in SQL)."""

    checkpoint_id: int
    location: str | None
    # Shared state files (incremental checkpoints) no retained checkpoint refers to any more: names
    # inside ``shared_dir``, deleted with the checkpoint.
    shared_files: tuple[str, ...] = ()
    shared_dir: str | None = None
