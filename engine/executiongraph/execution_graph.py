"""ExecutionGraph: one ExecutionJobVertex per JobVertex, one ExecutionVertex per
subtask, one Execution per attempt. Runtime objects; no I/O but a log line per job state change."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from millstream.engine.executiongraph.states import (
    ExecutionState,
    JobStatus,
    job_transition,
    task_transition,
)
from millstream.engine.graph.job_graph import JobGraph, JobVertex

Clock = Callable[[], float]

log = logging.getLogger("millstream.executiongraph")


def now_ms(clock: Clock = time.time) -> int:
    return int(clock() * 1000)


@dataclass
class Execution:
    """One attempt to run a subtask."""

    attempt: int
    state: ExecutionState = ExecutionState.CREATED
    timestamps: dict[str, int] = field(default_factory=dict)
    taskmanager_id: str | None = None
    slot: int | None = None
    failure: str | None = None

    def transition(self, target: ExecutionState, at_ms: int) -> bool:
        """Move to ``target``; False (and no change) if the move is not allowed."""
        try:
            new = task_transition(self.state, target)
        except Exception:
            return False
        if new is not self.state:
            self.state = new
            self.timestamps.setdefault(new.value, at_ms)
        return True


@dataclass
class ExecutionVertex:
    job_vertex_id: str
    subtask: int
    executions: list[Execution] = field(default_factory=list)

    @property
    def current(self) -> Execution:
        return self.executions[-1]

    def new_attempt(self, at_ms: int) -> Execution:
        e = Execution(attempt=len(self.executions))
        e.timestamps[ExecutionState.CREATED.value] = at_ms
        self.executions.append(e)
        return e


@dataclass
class ExecutionJobVertex:
    job_vertex: JobVertex
    subtasks: list[ExecutionVertex]

    def state_counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in ExecutionState}
        for sv in self.subtasks:
            counts[sv.current.state.value] += 1
        return counts

    def aggregate_state(self) -> ExecutionState:
        """Flink's getAggregateJobVertexState, except that vertices not yet running
        show their most advanced deployment stage instead of collapsing to CREATED."""
        states = [sv.current.state for sv in self.subtasks]
        for s in (
            ExecutionState.FAILED,
            ExecutionState.CANCELING,
            ExecutionState.CANCELED,
            ExecutionState.INITIALIZING,
            ExecutionState.RUNNING,
        ):
            if s in states:
                return s
        if ExecutionState.FINISHED in states:
            return ExecutionState.FINISHED if all(s is ExecutionState.FINISHED for s in states) else ExecutionState.RUNNING
        for s in (ExecutionState.DEPLOYING, ExecutionState.SCHEDULED):
            if s in states:
                return s
        return ExecutionState.CREATED


@dataclass
class ExecutionGraph:
    job_graph: JobGraph
    vertices: dict[str, ExecutionJobVertex]
    status: JobStatus = JobStatus.CREATED
    timestamps: dict[str, int] = field(default_factory=dict)
    # When the job was submitted (Flink's start-time). Kept apart from timestamps["CREATED"]: a restart
    # passes through CREATED again and moves that one, but a failover must not make the job look new.
    start_time: int = 0
    attempt: int = 0  # the job-wide restart epoch; channels are keyed by it
    failure_cause: str | None = None
    status_message: str | None = None  # e.g. "waiting for resources: 4 slots needed, 2 free"

    @staticmethod
    def from_job_graph(job_graph: JobGraph, at_ms: int) -> "ExecutionGraph":
        vertices: dict[str, ExecutionJobVertex] = {}
        for jv in job_graph.vertices:
            subtasks = []
            for i in range(jv.parallelism):
                ev = ExecutionVertex(jv.id, i)
                ev.new_attempt(at_ms)
                subtasks.append(ev)
            vertices[jv.id] = ExecutionJobVertex(jv, subtasks)
        eg = ExecutionGraph(job_graph, vertices)
        eg.timestamps[JobStatus.CREATED.value] = at_ms
        eg.start_time = at_ms
        return eg

    def transition(self, target: JobStatus, at_ms: int) -> bool:
        try:
            new = job_transition(self.status, target)
        except Exception:
            return False
        if new is not self.status:
            # The job's lifecycle in the JobManager's log, in the words Flink's log uses for it.
            log.info(
                "Job %s (%s) switched from state %s to %s%s.", self.job_graph.name, self.job_graph.job_id,
                self.status.value, new.value,
                f" ({self.failure_cause.strip().splitlines()[-1][:300]})" if new is JobStatus.FAILED and self.failure_cause else "",
            )
            self.status = new
            self.timestamps[new.value] = at_ms
        return True

    def all_executions(self) -> list[tuple[ExecutionJobVertex, ExecutionVertex]]:
        return [(ejv, ev) for ejv in self.vertices.values() for ev in ejv.subtasks]

    def task_counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in ExecutionState}
        for _, ev in self.all_executions():
            counts[ev.current.state.value] += 1
        return counts

    def all_in(self, *states: ExecutionState) -> bool:
        return all(ev.current.state in states for _, ev in self.all_executions())

    def total_subtasks(self) -> int:
        return sum(v.job_vertex.parallelism for v in self.vertices.values())

    def reset_for_restart(self, at_ms: int) -> None:
        """A new epoch: every subtask gets a fresh attempt (global failover)."""
        self.attempt += 1
        for _, ev in self.all_executions():
            ev.new_attempt(at_ms)
