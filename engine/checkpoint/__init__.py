"""Exactly-once checkpointing (asynchronous barrier snapshotting): the coordinator's bookkeeping,
statistics in Flink's REST shapes, state redistribution on restore, and checkpoint storage.

Everything but ``storage`` is pure: time comes in as numbers and decisions go out as actions.
"""
from engine.checkpoint.completed_checkpoint import CompletedCheckpoint, OperatorInfo, operators_of_job_graph
from engine.checkpoint.config import (
    CheckpointConfig,
    CheckpointingMode,
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
    InvalidCheckpointConfig,
)
from engine.checkpoint.coordinator import CheckpointCoordinator, CheckpointTriggerError, FailedCheckpoint
from engine.checkpoint.failure_manager import CheckpointFailureReason
from engine.checkpoint.messages import (
    CheckpointType,
    DiscardAction,
    NotifyAbortedAction,
    NotifyCompleteAction,
    TaskAck,
    TaskId,
    TriggerAction,
)
from engine.checkpoint.pending_checkpoint import PendingCheckpoint
from engine.checkpoint.stats_tracker import CheckpointStats, CheckpointStatsTracker

__all__ = [
    "CheckpointConfig",
    "CheckpointCoordinator",
    "CheckpointFailureReason",
    "CheckpointStats",
    "CheckpointStatsTracker",
    "CheckpointTriggerError",
    "CheckpointType",
    "CheckpointingMode",
    "CompletedCheckpoint",
    "DiscardAction",
    "ExternalizedCheckpointCleanup",
    "ExternalizedCheckpointRetention",
    "FailedCheckpoint",
    "InvalidCheckpointConfig",
    "NotifyAbortedAction",
    "NotifyCompleteAction",
    "OperatorInfo",
    "PendingCheckpoint",
    "TaskAck",
    "TaskId",
    "TriggerAction",
    "operators_of_job_graph",
]
