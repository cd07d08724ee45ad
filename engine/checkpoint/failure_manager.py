"""CheckpointFailureManager: counts consecutive checkpoint failures against the tolerable number.

As in Flink, savepoint failures, aborts caused by a job failover and declines
of tasks that could not take the checkpoint (not running yet, or finished)
do not count. The count is of failures since the last completed checkpoint:
a completed checkpoint resets it, and so does a restore (the new attempt is
judged on its own checkpoints, so one bad checkpoint cannot fail every
attempt after it).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class CheckpointFailureReason(str, Enum):
    """Flink's reasons, with its messages; ``counts`` says whether the failure counts as a checkpoint failure."""

    CHECKPOINT_EXPIRED = "Checkpoint expired before completing."
    CHECKPOINT_DECLINED = "Checkpoint was declined."
    # A subtask had already finished or was not running yet: Flink does not count these.
    CHECKPOINT_DECLINED_TASK_NOT_READY = "Checkpoint was declined (tasks not ready)."
    FINALIZE_CHECKPOINT_FAILURE = "Failure to finalize checkpoint."
    CHECKPOINT_SUBSUMED = "Checkpoint has been subsumed."
    JOB_FAILOVER_REGION = "Checkpoint was aborted due to a job failover."
    CHECKPOINT_COORDINATOR_SHUTDOWN = "CheckpointCoordinator shutdown."

    @property
    def counts(self) -> bool:
        return self in (
            CheckpointFailureReason.CHECKPOINT_EXPIRED,
            CheckpointFailureReason.CHECKPOINT_DECLINED,
            CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE,
        )


@dataclass(frozen=True)
class FailureVerdict:
    should_fail_job: bool
    message: str | None = None


class CheckpointFailureManager:
    def __init__(self, tolerable_failures: int) -> None:
        self.tolerable_failures = tolerable_failures
        self.continuous_failures = 0

    def on_failure(self, reason: CheckpointFailureReason, is_savepoint: bool, detail: str) -> FailureVerdict:
        if is_savepoint or not reason.counts:
            return FailureVerdict(False)
        self.continuous_failures += 1
        if self.continuous_failures <= self.tolerable_failures:
            return FailureVerdict(False)
        self.continuous_failures = 0  # the job fails over; the next run starts counting afresh
        return FailureVerdict(
            True,
            "Exceeded checkpoint tolerable failure threshold "
            f"({self.tolerable_failures}). The latest checkpoint failed due to {detail}",
        )

    def on_success(self) -> None:
        self.continuous_failures = 0

    def on_restore(self) -> None:
        self.continuous_failures = 0
