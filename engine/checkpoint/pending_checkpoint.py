"""PendingCheckpoint: a triggered checkpoint collecting its tasks' acknowledgements."""
from __future__ import annotations

from enum import Enum
from typing import Iterable

from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint, OperatorInfo
from millstream.engine.checkpoint.config import CheckpointingMode
from millstream.engine.checkpoint.messages import CheckpointType, TaskAck, TaskId


class TaskAcknowledgeResult(str, Enum):
    SUCCESS = "SUCCESS"
    DUPLICATE = "DUPLICATE"
    UNKNOWN = "UNKNOWN"  # the task is not one this checkpoint waits for
    DISCARDED = "DISCARDED"  # the checkpoint already failed


class PendingCheckpoint:
    def __init__(
        self,
        job_id: str,
        checkpoint_id: int,
        checkpoint_type: CheckpointType,
        trigger_timestamp: int,
        tasks_to_ack: Iterable[TaskId],
        mode: CheckpointingMode,
        location: str | None,
        request_id: str | None = None,
        drain: bool = False,
    ) -> None:
        self.job_id = job_id
        self.checkpoint_id = checkpoint_id
        self.checkpoint_type = checkpoint_type
        self.trigger_timestamp = trigger_timestamp
        self.tasks_to_ack = frozenset(tasks_to_ack)
        self.mode = mode
        self.location = location
        self.request_id = request_id
        self.drain = drain
        self.acks: dict[TaskId, TaskAck] = {}
        self.discarded = False

    @property
    def is_savepoint(self) -> bool:
        return self.checkpoint_type.is_savepoint()

    @property
    def num_acknowledged(self) -> int:
        return len(self.acks)

    @property
    def is_fully_acknowledged(self) -> bool:
        return not self.discarded and len(self.acks) == len(self.tasks_to_ack)

    def not_yet_acknowledged(self) -> list[TaskId]:
        return sorted(self.tasks_to_ack - self.acks.keys())

    def is_expired(self, now_ms: int, timeout_ms: int) -> bool:
        return now_ms >= self.trigger_timestamp + timeout_ms

    def acknowledge(self, task_id: TaskId, ack: TaskAck) -> TaskAcknowledgeResult:
        if self.discarded:
            return TaskAcknowledgeResult.DISCARDED
        if task_id not in self.tasks_to_ack:
            return TaskAcknowledgeResult.UNKNOWN
        if task_id in self.acks:
            return TaskAcknowledgeResult.DUPLICATE
        self.acks[task_id] = ack
        return TaskAcknowledgeResult.SUCCESS

    def discard(self) -> None:
        self.discarded = True

    def finalize(self, now_ms: int, operators: Iterable[OperatorInfo]) -> CompletedCheckpoint:
        if not self.is_fully_acknowledged:
            missing = ", ".join(f"{v}#{s}" for v, s in self.not_yet_acknowledged()[:5])
            raise RuntimeError(f"checkpoint {self.checkpoint_id} is not fully acknowledged; waiting for {missing}")
        return CompletedCheckpoint.from_acks(
            self.job_id,
            self.checkpoint_id,
            self.checkpoint_type,
            self.trigger_timestamp,
            now_ms,
            self.location,
            self.acks,
            operators,
            self.request_id,
        )
