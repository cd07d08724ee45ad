"""Job and task states, and the one function that moves between them.

``transition`` owns every state change and refuses to leave a terminal state,
so a late message from a dead attempt can never resurrect a finished job.
"""
from __future__ import annotations

from enum import Enum


class JobStatus(str, Enum):
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    RESTARTING = "RESTARTING"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    SUSPENDED = "SUSPENDED"
    # Flink's state for a job whose new JobManager waits for its tasks to report back. Millstream's
    # takeover (task_reconciliation.py) gathers the task reports before it serves the job, so a
    # job is RUNNING again when anyone can see it; the member exists so that programs comparing a
    # JobClient's status with it load and compare as in PyFlink.
    RECONCILING = "RECONCILING"

    def is_terminal(self) -> bool:
        return self in (JobStatus.CANCELED, JobStatus.FINISHED, JobStatus.FAILED)


class ExecutionState(str, Enum):
    CREATED = "CREATED"
    SCHEDULED = "SCHEDULED"
    DEPLOYING = "DEPLOYING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"
    FAILED = "FAILED"

    def is_terminal(self) -> bool:
        return self in (ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED)


_JOB_ALLOWED: dict[JobStatus, set[JobStatus]] = {
    JobStatus.CREATED: {JobStatus.RUNNING, JobStatus.CANCELLING, JobStatus.CANCELED, JobStatus.FAILED, JobStatus.FAILING, JobStatus.SUSPENDED},
    JobStatus.RUNNING: {JobStatus.FINISHED, JobStatus.FAILING, JobStatus.CANCELLING, JobStatus.RESTARTING, JobStatus.SUSPENDED},
    JobStatus.FAILING: {JobStatus.FAILED, JobStatus.RESTARTING, JobStatus.CANCELLING, JobStatus.SUSPENDED},
    JobStatus.RESTARTING: {JobStatus.CREATED, JobStatus.RUNNING, JobStatus.FAILED, JobStatus.CANCELLING, JobStatus.CANCELED, JobStatus.SUSPENDED},
    JobStatus.CANCELLING: {JobStatus.CANCELED, JobStatus.SUSPENDED},
    JobStatus.SUSPENDED: {JobStatus.CREATED, JobStatus.RUNNING, JobStatus.CANCELED, JobStatus.FAILED},
    # As in Flink: reconciling ends in the job running again, or in it failing or being cancelled.
    JobStatus.RECONCILING: {JobStatus.RUNNING, JobStatus.FAILING, JobStatus.FAILED, JobStatus.CANCELLING, JobStatus.SUSPENDED},
}

_TASK_ORDER = [
    ExecutionState.CREATED,
    ExecutionState.SCHEDULED,
    ExecutionState.DEPLOYING,
    ExecutionState.INITIALIZING,
    ExecutionState.RUNNING,
]


class IllegalTransition(Exception):
    pass


def job_transition(current: JobStatus, target: JobStatus) -> JobStatus:
    """Return ``target`` if the job may move there from ``current``; raise otherwise."""
    if current is target:
        return current
    if current.is_terminal():
        raise IllegalTransition(f"job is {current.value}; cannot become {target.value}")
    if target not in _JOB_ALLOWED.get(current, set()):
        raise IllegalTransition(f"job cannot go from {current.value} to {target.value}")
    return target


def task_transition(current: ExecutionState, target: ExecutionState) -> ExecutionState:
    """Task states move forward through the lifecycle, or to an end state."""
    if current is target:
        return current
    if current.is_terminal():
        raise IllegalTransition(f"task is {current.value}; cannot become {target.value}")
    if target in _TASK_ORDER:
        if current in _TASK_ORDER and _TASK_ORDER.index(target) > _TASK_ORDER.index(current):
            return target
        raise IllegalTransition(f"task cannot go from {current.value} to {target.value}")
    if target is ExecutionState.FINISHED and current not in (
        ExecutionState.DEPLOYING,
        ExecutionState.INITIALIZING,
        ExecutionState.RUNNING,
    ):
        raise IllegalTransition(f"task cannot finish from {current.value}")
    return target  # CANCELING, CANCELED and FAILED are reachable from any live state
