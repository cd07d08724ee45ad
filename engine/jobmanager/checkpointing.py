"""The JobManager's side of checkpointing for one job: it carries out what the
CheckpointCoordinator decides.

Triggers go to the source subtasks' slots, acknowledgements and declines come
back through the JobManager inbox, a completed checkpoint gets its
``_metadata`` written last, then every task is notified (the commit point for
two-phase-commit sinks) and subsumed checkpoints are deleted.
"""
from __future__ import annotations

import functools
import logging
import os
import threading
from typing import Any

from engine.checkpoint import stats as checkpoint_stats
from engine.checkpoint.completed_checkpoint import CompletedCheckpoint
from engine.checkpoint.config import CheckpointConfig
from engine.checkpoint.coordinator import CheckpointCoordinator, FailedCheckpoint
from engine.checkpoint.messages import DiscardAction, TaskAck
from engine.checkpoint.storage import FileSystemCheckpointStorage
from engine.executiongraph.execution_graph import ExecutionGraph
from engine.executiongraph.states import ExecutionState, JobStatus
from engine.graph.job_graph import JobGraph
from engine.taskexecutor import messages
from engine.taskexecutor.gateway import TaskExecutorGateway

log = logging.getLogger("millstream.checkpointing")


def _locked(method):
    """The dispatcher thread changes checkpoint statistics while REST and dashboard threads read them."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self.lock:
            return method(self, *args, **kwargs)

    return wrapper


class JobCheckpointing:
    def __init__(self, job_graph: JobGraph, gateway: TaskExecutorGateway, default_dir: str) -> None:
        config = CheckpointConfig.from_job_config(job_graph.config)
        if config.storage_dir is None:
            config.set_checkpoint_storage_dir(default_dir)
        self.job_id = job_graph.job_id
        self.config = config
        self.gateway = gateway
        self.coordinator = CheckpointCoordinator.for_job_graph(job_graph, config)
        self.storage = FileSystemCheckpointStorage(config.storage_dir or default_dir)
        self.failure_message: str | None = None  # set when failed checkpoints must fail the job
        self.lock = threading.RLock()

    @property
    def enabled(self) -> bool:
        return self.config.is_checkpointing_enabled()

    def _placement(self, eg: ExecutionGraph, vertex: str, subtask: int) -> tuple[str, int] | None:
        ex = eg.vertices[vertex].subtasks[subtask].current
        if ex.taskmanager_id is None or ex.slot is None:
            return None
        return ex.taskmanager_id, ex.slot

    @_locked
    def tick(self, eg: ExecutionGraph, now_ms: int) -> None:
        if not self.enabled:
            return
        for failed in self.coordinator.expire(now_ms):
            self._failed(failed)
        running = eg.status is JobStatus.RUNNING and eg.all_in(ExecutionState.RUNNING)
        action = self.coordinator.maybe_trigger(now_ms, running)
        if action is None:
            return
        barrier = (action.checkpoint_id, action.timestamp, action.location, action.checkpoint_type.value)
        for vertex, subtask in action.tasks:
            where = self._placement(eg, vertex, subtask)
            if where is not None:
                msg = messages.trigger_checkpoint(self.job_id, eg.attempt, vertex, subtask, barrier)
                self.gateway.trigger_checkpoint(where[0], where[1], msg)

    @_locked
    def on_ack(self, msg: dict[str, Any], eg: ExecutionGraph, now_ms: int) -> None:
        ack = TaskAck.from_dict(msg["ack"])
        completed = self.coordinator.receive_ack(msg["checkpoint_id"], (msg["vertex"], msg["subtask"]), ack, now_ms)
        if completed is None:
            return
        try:
            self.storage.write_metadata(
                self.job_id, completed.checkpoint_id, completed.to_metadata(), location=completed.external_path
            )
        except Exception as e:
            failed = self.coordinator.fail_finalization(completed.checkpoint_id, f"writing _metadata failed: {e}", now_ms)
            if failed is not None:
                self._failed(failed)
            return
        notified: set[tuple[str, int]] = set()
        for vertex, subtask in completed.notify.tasks if completed.notify else ():
            where = self._placement(eg, vertex, subtask)
            if where is not None and where not in notified:
                notified.add(where)
                msg_out = messages.notify_checkpoint_complete(self.job_id, eg.attempt, completed.checkpoint_id)
                self.gateway.notify_checkpoint_complete(where[0], where[1], msg_out)
        self._discard(completed.discard)

    @_locked
    def on_decline(self, msg: dict[str, Any], now_ms: int) -> None:
        failed = self.coordinator.receive_decline(
            msg["checkpoint_id"], (msg["vertex"], msg["subtask"]), msg["reason"], now_ms, bool(msg.get("not_ready"))
        )
        if failed is not None:
            self._failed(failed)

    def _failed(self, failed: FailedCheckpoint) -> None:
        log.warning("checkpoint %d of job %s failed: %s", failed.checkpoint_id, self.job_id, failed.message)
        if failed.discard is not None:
            self._discard([failed.discard])
        if failed.should_fail_job and self.failure_message is None:
            self.failure_message = failed.job_failure_message or failed.message

    def _discard(self, actions: Any) -> None:
        for d in actions:
            if isinstance(d, DiscardAction) and d.location:
                try:
                    self.storage.discard(d.location)
                except Exception:
                    log.warning("could not delete checkpoint %s at %s", d.checkpoint_id, d.location, exc_info=True)

    @_locked
    def latest_in_storage(self) -> CompletedCheckpoint | None:
        """The newest complete checkpoint (one with ``_metadata``) of this job in checkpoint storage."""
        job_dir = os.path.join(self.config.storage_dir or "", self.job_id)
        try:
            names = [n for n in os.listdir(job_dir) if n.startswith("chk-") and n[4:].isdigit()]
        except OSError:
            return None
        for name in sorted(names, key=lambda n: int(n[4:]), reverse=True):
            path = os.path.join(job_dir, name)
            try:
                return CompletedCheckpoint.from_metadata(self.storage.read_metadata(path), external_path=path)
            except Exception:
                log.warning("skipping incomplete or unreadable checkpoint %s", path)
        return None

    @_locked
    def abort_all(self, reason: str, now_ms: int) -> None:
        for failed in self.coordinator.abort_all(reason, now_ms):
            if failed.discard is not None:
                self._discard([failed.discard])

    @_locked
    def on_terminal(self, status: JobStatus, now_ms: int) -> None:
        for failed in self.coordinator.abort_all(f"the job is {status.value}", now_ms):
            if failed.discard is not None:
                self._discard([failed.discard])
        self._discard(self.coordinator.on_job_terminal(status.value))

    # -- REST views (Flink's shapes) ---------------------------------------------------
    @_locked
    def overview(self) -> dict[str, Any]:
        return checkpoint_stats.checkpoints_overview(self.coordinator.stats)

    @_locked
    def config_view(self) -> dict[str, Any] | None:
        return checkpoint_stats.checkpoint_config(self.config)

    @_locked
    def details(self, checkpoint_id: int) -> dict[str, Any] | None:
        return checkpoint_stats.checkpoint_details(self.coordinator.stats, checkpoint_id)

    @_locked
    def subtasks(self, checkpoint_id: int, vertex_id: str) -> dict[str, Any] | None:
        return checkpoint_stats.subtask_details(self.coordinator.stats, checkpoint_id, vertex_id)
