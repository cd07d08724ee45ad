"""Exactly-once checkpointing (asynchronous barrier snapshotting): the coordinator's bookkeeping,
statistics in Flink's REST shapes, state redistribution on restore, and checkpoint storage.

Everything but ``storage`` is pure: time comes in as numbers and decisions go out as actions.
"""
from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint, OperatorInfo, operators_of_job_graph
from millstream.engine.checkpoint.config import (
    CheckpointConfig,
    CheckpointingMode,
    ExternalizedCheckpointCleanup,
    ExternalizedCheckpointRetention,
    InvalidCheckpointConfig,
)
from millstream.engine.checkpoint.coordinator import CheckpointCoordinator, CheckpointTriggerError, FailedCheckpoint
from millstream.engine.checkpoint.failure_manager import CheckpointFailureReason
from millstream.engine.checkpoint.messages import (
    CheckpointType,
    DiscardAction,
    NotifyAbortedAction,
    NotifyCompleteAction,
    TaskAck,
    TaskId,
    TriggerAction,
)
from millstream.engine.checkpoint.pending_checkpoint import PendingCheckpoint
from millstream.engine.checkpoint.stats_tracker import CheckpointStats, CheckpointStatsTracker

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
