"""CheckpointCoordinator: decides when to trigger, collects acks and declines, completes, expires and retains checkpoints.

It does no I/O and reads no clock: each method takes ``now_ms`` and returns
plain actions (trigger, notify, discard) for the JobMaster to carry out.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint, OperatorInfo, operators_of_job_graph
from millstream.engine.checkpoint.config import CheckpointConfig, CheckpointingMode, ExternalizedCheckpointRetention
from millstream.engine.checkpoint.failure_manager import CheckpointFailureManager, CheckpointFailureReason
from millstream.engine.checkpoint.messages import (
    CheckpointType,
    DiscardAction,
    NotifyAbortedAction,
    NotifyCompleteAction,
    TaskAck,
    TaskId,
    TriggerAction,
)
from millstream.engine.checkpoint.pending_checkpoint import PendingCheckpoint, TaskAcknowledgeResult
from millstream.engine.checkpoint.stats_tracker import (
    CheckpointStats,
    CheckpointStatsTracker,
    RestoredCheckpointStats,
    SubtaskStats,
)
from millstream.engine.checkpoint.shared_state_registry import SharedStateRegistry
from millstream.engine.checkpoint.storage import checkpoint_location, savepoint_location, shared_location


class CheckpointTriggerError(ValueError):
    pass


@dataclass(frozen=True)
class FailedCheckpoint:
    job_id: str
    checkpoint_id: int
    checkpoint_type: CheckpointType
    trigger_timestamp: int
    failure_timestamp: int
    reason: CheckpointFailureReason
    message: str
    notify_aborted: NotifyAbortedAction
    discard: DiscardAction | None  # the partial state written so far
    task: TaskId | None = None  # the task that declined, if one did
    request_id: str | None = None
    should_fail_job: bool = False  # too many checkpoint failures in a row: fail the job with job_failure_message
    job_failure_message: str | None = None


# What each retention policy deletes when the job reaches a terminal state (Flink's CheckpointProperties).
# SUSPENDED never deletes: a restarted JobManager resumes the job from these checkpoints.
_DISCARD_ON_END = {
    ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS: {"FINISHED", "CANCELED", "FAILED"},
    ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION: {"FINISHED", "CANCELED"},
    ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION: set(),
}


class CheckpointCoordinator:
    def __init__(
        self,
        job_id: str,
        config: CheckpointConfig,
        tasks_to_trigger: Sequence[TaskId],
        tasks_to_ack: Sequence[TaskId],
        operators: Iterable[OperatorInfo] = (),
        *,
        tasks_to_commit: Sequence[TaskId] | None = None,
        stats: CheckpointStatsTracker | None = None,
        completed: Iterable[CompletedCheckpoint] = (),
        checkpoint_id_counter: int = 1,
    ) -> None:
        """``completed`` and ``stats`` carry state over a JobManager restart; ids continue after all of it."""
        if not tasks_to_trigger or not tasks_to_ack:
            raise ValueError("a checkpoint needs at least one task to trigger and one task to acknowledge")
        self.job_id = job_id
        self.config = config
        self.tasks_to_trigger = tuple(_tid(t) for t in tasks_to_trigger)
        self.tasks_to_ack = tuple(_tid(t) for t in tasks_to_ack)
        self.tasks_to_commit = tuple(_tid(t) for t in tasks_to_commit) if tasks_to_commit else self.tasks_to_ack
        self.operators = tuple(operators)
        self.stats = stats or CheckpointStatsTracker()
        self.failure_manager = CheckpointFailureManager(config.tolerable_failures)
        self.pending: dict[int, PendingCheckpoint] = {}
        self.completed: list[CompletedCheckpoint] = []  # retained checkpoints, oldest first
        # savepoints, and a checkpoint the job was started from: this job never deletes them
        self.savepoints: list[CompletedCheckpoint] = []
        # Shared files of incremental checkpoints: deleted when no retained checkpoint refers to them.
        self.shared_registry = SharedStateRegistry()
        completed = sorted(completed, key=lambda c: c.checkpoint_id)
        for c in completed:
            (self.savepoints if c.is_savepoint else self.completed).append(c)
            self.shared_registry.register(c.checkpoint_id, c.shared_names())
        self._next_id = max(
            [checkpoint_id_counter, self.stats.max_id + 1, *(c.checkpoint_id + 1 for c in completed)]
        )
        self._num_subtasks: dict[str, int] = {}
        for vid, _ in self.tasks_to_ack:
            self._num_subtasks[vid] = self._num_subtasks.get(vid, 0) + 1
        self._next_due: int | None = None
        self._last_completion: int | None = None
        self._requests: dict[str, TriggerAction] = {}
        self._last_subsumed: tuple[int, list[CompletedCheckpoint]] = (0, [])

    @staticmethod
    def for_job_graph(job_graph: Any, config: CheckpointConfig | None = None, **kwargs: Any) -> "CheckpointCoordinator":
        """Sources are triggered; every subtask acknowledges (``millstream.engine.graph.job_graph.JobGraph``)."""
        cfg = config or CheckpointConfig.from_job_config(job_graph.config)
        trigger = [(v.id, i) for v in job_graph.vertices if v.is_source for i in range(v.parallelism)]
        ack = [(v.id, i) for v in job_graph.vertices for i in range(v.parallelism)]
        return CheckpointCoordinator(job_graph.job_id, cfg, trigger, ack, operators_of_job_graph(job_graph), **kwargs)

    @property
    def next_checkpoint_id(self) -> int:
        return self._next_id

    # -- triggering ----------------------------------------------------------
    def maybe_trigger(self, now_ms: int, job_running: bool = True) -> TriggerAction | None:
        """The periodic trigger: every ``interval_ms``, at least ``min_pause_ms`` after the last completion,
        and never more than ``max_concurrent`` at once. The interval restarts whenever the job is not running."""
        if not self.config.is_checkpointing_enabled():
            return None
        if not job_running:
            self._next_due = None
            return None
        if self._next_due is None:
            self._next_due = now_ms + self.config.interval_ms
        if now_ms < self.next_due_ms() or len(self.pending) >= self._max_concurrent():  # type: ignore[operator]
            return None
        self._next_due = now_ms + self.config.interval_ms
        return self._trigger(now_ms, CheckpointType.CHECKPOINT)

    def next_due_ms(self) -> int | None:
        """When the next periodic checkpoint may start (None: not scheduled), for the caller's timer."""
        if self._next_due is None:
            return None
        if self._last_completion is None:
            return self._next_due
        return max(self._next_due, self._last_completion + self.config.min_pause_ms)

    def _max_concurrent(self) -> int:
        # As in Flink, a minimum pause implies one checkpoint at a time.
        return 1 if self.config.min_pause_ms > 0 else self.config.max_concurrent

    def trigger_checkpoint(self, now_ms: int, request_id: str | None = None) -> TriggerAction:
        """A checkpoint triggered by hand (REST): not subject to the interval, pause or concurrency limits."""
        if request_id is not None and request_id in self._requests:
            return dataclasses.replace(self._requests[request_id], duplicate=True)
        return self._trigger(now_ms, CheckpointType.CHECKPOINT, request_id=request_id)

    def trigger_savepoint(
        self, now_ms: int, target_dir: str, request_id: str, *, stop: bool = False, drain: bool = False
    ) -> TriggerAction:
        """A savepoint into ``target_dir``; with ``stop`` the job finishes once it completes (stop-with-savepoint).
        A ``request_id`` seen before returns the first trigger with ``duplicate=True``."""
        if request_id in self._requests:
            return dataclasses.replace(self._requests[request_id], duplicate=True)
        if not target_dir:
            raise CheckpointTriggerError(
                "no savepoint target directory given and no default savepoint directory configured"
            )
        kind = CheckpointType.SYNC_SAVEPOINT if stop else CheckpointType.SAVEPOINT
        return self._trigger(now_ms, kind, request_id=request_id, target_dir=target_dir, drain=drain)

    def _trigger(
        self,
        now_ms: int,
        kind: CheckpointType,
        request_id: str | None = None,
        target_dir: str | None = None,
        drain: bool = False,
    ) -> TriggerAction:
        cid = self._next_id
        self._next_id += 1
        if target_dir is not None:
            location: str | None = savepoint_location(target_dir, self.job_id, cid)
        elif self.config.storage_dir:
            location = checkpoint_location(self.config.storage_dir, self.job_id, cid)
        else:
            location = None
        # Savepoints are always aligned, whatever the job's mode.
        mode = CheckpointingMode.EXACTLY_ONCE if kind.is_savepoint() else self.config.mode
        self.pending[cid] = PendingCheckpoint(
            self.job_id, cid, kind, now_ms, self.tasks_to_ack, mode, location, request_id, drain
        )
        self.stats.report_pending(
            CheckpointStats(cid, kind, now_ms, dict(self._num_subtasks), request_id=request_id)
        )
        action = TriggerAction(self.job_id, cid, kind, now_ms, self.tasks_to_trigger, mode, location, request_id, drain)
        if request_id is not None:
            self._requests[request_id] = action
        return action

    # -- acknowledgements ------------------------------------------------------
    def receive_ack(self, checkpoint_id: int, task_id: TaskId, ack: TaskAck, now_ms: int) -> CompletedCheckpoint | None:
        """Record one task's ack; returns the CompletedCheckpoint when it was the last one.
        Acks for unknown, failed or expired checkpoints, from unknown tasks, and repeated acks are ignored."""
        pending = self.pending.get(checkpoint_id)
        if pending is None:
            return None
        tid = _tid(task_id)
        if pending.acknowledge(tid, ack) is not TaskAcknowledgeResult.SUCCESS:
            return None
        at = ack.ack_timestamp if ack.ack_timestamp is not None else now_ms
        self.stats.report_ack(checkpoint_id, tid[0], SubtaskStats.from_ack(tid[1], ack, at))
        if not pending.is_fully_acknowledged:
            return None
        return self._complete(pending, now_ms)

    def _complete(self, pending: PendingCheckpoint, now_ms: int) -> CompletedCheckpoint:
        cid = pending.checkpoint_id
        del self.pending[cid]
        self.failure_manager.on_success()
        self._last_completion = now_ms
        self.stats.report_completed(cid, pending.location)
        discard: list[DiscardAction] = []
        aborted: list[NotifyAbortedAction] = []
        finalized = pending.finalize(now_ms, self.operators)
        # Registered before anything it subsumes lets go, so the files they share stay.
        self.shared_registry.register(cid, finalized.shared_names())
        if not pending.is_savepoint:
            # the new one plus the newest retained - 1 stay
            drop = max(0, len(self.completed) - (self.config.retained - 1))
            subsumed, self.completed = self.completed[:drop], self.completed[drop:]
            self._last_subsumed = (cid, subsumed)
            for old in subsumed:
                self.stats.report_discarded(old.checkpoint_id)
                freed = self.shared_registry.unregister(old.checkpoint_id)
                discard.append(self._discard_action(old.checkpoint_id, old.external_path, freed))
            # Older checkpoints still in flight can no longer matter (Flink drops them as subsumed).
            for older in [p for p in self.pending.values() if p.checkpoint_id < cid and not p.is_savepoint]:
                failed = self._fail(older, CheckpointFailureReason.CHECKPOINT_SUBSUMED, now_ms, "")
                aborted.append(failed.notify_aborted)
                if failed.discard is not None:
                    discard.append(failed.discard)
        completed = dataclasses.replace(
            finalized,
            notify=NotifyCompleteAction(self.job_id, cid, self.tasks_to_commit),
            notify_aborted=tuple(aborted),
            discard=tuple(discard),
        )
        (self.savepoints if completed.is_savepoint else self.completed).append(completed)
        return completed

    def fail_finalization(self, checkpoint_id: int, reason: str, now_ms: int) -> FailedCheckpoint | None:
        """The caller could not write the metadata of a checkpoint that just completed: it fails, and the
        checkpoints it subsumed come back (the caller discards them only after the metadata is written)."""
        victim = next((c for c in [*self.completed, *self.savepoints] if c.checkpoint_id == checkpoint_id), None)
        if victim is None:
            return None
        if victim.is_savepoint:
            self.savepoints.remove(victim)
        else:
            self.completed.remove(victim)
            if self._last_subsumed[0] == checkpoint_id:
                self.completed[:0] = self._last_subsumed[1]
                for old in self._last_subsumed[1]:
                    self.stats.undo_discarded(old.checkpoint_id)
                    self.shared_registry.register(old.checkpoint_id, old.shared_names())
                self._last_subsumed = (0, [])
        freed = self.shared_registry.unregister(checkpoint_id)
        stand_in = PendingCheckpoint(
            self.job_id, checkpoint_id, victim.checkpoint_type, victim.trigger_timestamp, (), self.config.mode,
            victim.external_path, victim.request_id,
        )
        self.pending[checkpoint_id] = stand_in  # so that _fail finds it like any other
        return self._fail(stand_in, CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE, now_ms, reason, freed=freed)

    # -- failures ----------------------------------------------------------------
    def receive_decline(
        self, checkpoint_id: int, task_id: TaskId, reason: str, now_ms: int, task_not_ready: bool = False
    ) -> FailedCheckpoint | None:
        """``task_not_ready``: the task had finished or had not started; such declines are not counted."""
        pending = self.pending.get(checkpoint_id)
        tid = _tid(task_id)
        if pending is None or tid not in pending.tasks_to_ack:
            return None
        kind = (
            CheckpointFailureReason.CHECKPOINT_DECLINED_TASK_NOT_READY
            if task_not_ready
            else CheckpointFailureReason.CHECKPOINT_DECLINED
        )
        return self._fail(pending, kind, now_ms, f"task {tid[0]} ({tid[1]}): {reason}", tid)

    def expire(self, now_ms: int) -> list[FailedCheckpoint]:
        """Fail every checkpoint older than the timeout."""
        return [
            self._fail(p, CheckpointFailureReason.CHECKPOINT_EXPIRED, now_ms, "")
            for p in sorted(self.pending.values(), key=lambda p: p.checkpoint_id)
            if p.is_expired(now_ms, self.config.timeout_ms)
        ]

    def abort_all(self, reason: str, now_ms: int) -> list[FailedCheckpoint]:
        """The job fails over or stops: abort everything in flight (not counted as checkpoint failures)."""
        self._next_due = None
        return [
            self._fail(p, CheckpointFailureReason.JOB_FAILOVER_REGION, now_ms, reason)
            for p in sorted(self.pending.values(), key=lambda p: p.checkpoint_id)
        ]

    def _fail(
        self,
        pending: PendingCheckpoint,
        reason: CheckpointFailureReason,
        now_ms: int,
        detail: str,
        task: TaskId | None = None,
        freed: list[str] | None = None,
    ) -> FailedCheckpoint:
        """``freed``: shared files to delete with it; by default those its acks wrote that no retained
        checkpoint uses (an incremental checkpoint that failed leaves no file behind it knows of)."""
        cid = pending.checkpoint_id
        if freed is None:
            freed = self.shared_registry.unused(n for a in pending.acks.values() for ns in a.shared_files.values() for n in ns)
        del self.pending[cid]
        pending.discard()
        message = f"{reason.value} {detail}".strip()
        self.stats.report_failed(cid, now_ms, message)
        verdict = self.failure_manager.on_failure(reason, pending.is_savepoint, message)
        return FailedCheckpoint(
            job_id=self.job_id,
            checkpoint_id=cid,
            checkpoint_type=pending.checkpoint_type,
            trigger_timestamp=pending.trigger_timestamp,
            failure_timestamp=now_ms,
            reason=reason,
            message=message,
            notify_aborted=NotifyAbortedAction(self.job_id, cid, self.tasks_to_commit, message),
            discard=self._discard_action(cid, pending.location, freed) if pending.location or freed else None,
            task=task,
            request_id=pending.request_id,
            should_fail_job=verdict.should_fail_job,
            job_failure_message=verdict.message,
        )

    # -- what to restore from --------------------------------------------------
    def latest_completed(self, include_savepoints: bool = True) -> CompletedCheckpoint | None:
        """The newest completed checkpoint (or savepoint): the state a failover resets every task to."""
        candidates = [*self.completed, *(self.savepoints if include_savepoints else ())]
        return max(candidates, key=lambda c: c.checkpoint_id, default=None)

    def restore_latest(self, now_ms: int) -> CompletedCheckpoint | None:
        """On failover: the checkpoint to reset to, counted as a restore in the statistics. The new
        attempt starts with no checkpoint failures counted against it, whether or not there is one."""
        self.failure_manager.on_restore()
        latest = self.latest_completed()
        if latest is not None:
            self._report_restored(latest, now_ms)
        return latest

    def restore_from(self, checkpoint: CompletedCheckpoint, now_ms: int) -> None:
        """The job starts from a savepoint or retained checkpoint: ids continue after it, a failover before
        the first new checkpoint returns to it, and it is never deleted by this job."""
        self.keep_as_fallback(checkpoint)
        self._report_restored(checkpoint, now_ms)

    def keep_as_fallback(self, checkpoint: CompletedCheckpoint) -> None:
        """``restore_from`` without counting a restore: a JobManager that adopted the running tasks
        (they restored nothing) still returns to this checkpoint on the next failover."""
        self._next_id = max(self._next_id, checkpoint.checkpoint_id + 1)
        if not any(c.checkpoint_id == checkpoint.checkpoint_id for c in self.completed):
            self.savepoints.append(checkpoint)
            self.shared_registry.register(checkpoint.checkpoint_id, checkpoint.shared_names())

    def continue_after(self, checkpoint_id: int) -> None:
        """Hand out no id up to ``checkpoint_id`` again: the running tasks a new JobManager adopted saw
        barriers up to it from the old one (possibly of checkpoints SQL never heard of), and an ack
        of such an old barrier must never count for a new checkpoint."""
        self._next_id = max(self._next_id, checkpoint_id + 1)

    def adopt_retained(self, checkpoints: Iterable[CompletedCheckpoint]) -> None:
        """After a JobManager restart: this job's checkpoints found complete in storage are retained
        again, with the shared files they refer to registered (rebuilt from their ``_metadata``),
        so retention goes on deleting old ones and never deletes a file a retained one still uses."""
        known = {c.checkpoint_id for c in [*self.completed, *self.savepoints]}
        for c in sorted(checkpoints, key=lambda c: c.checkpoint_id):
            if c.is_savepoint or c.checkpoint_id in known:
                continue
            self.completed.append(c)
            self.shared_registry.register(c.checkpoint_id, c.shared_names())
        self.completed.sort(key=lambda c: c.checkpoint_id)
        if self.completed:
            self._next_id = max(self._next_id, self.completed[-1].checkpoint_id + 1)

    def _report_restored(self, c: CompletedCheckpoint, now_ms: int) -> None:
        self.failure_manager.on_restore()
        self.stats.report_restored(RestoredCheckpointStats(c.checkpoint_id, now_ms, c.is_savepoint, c.external_path))

    def on_job_terminal(self, job_status: Any) -> list[DiscardAction]:
        """The job reached ``job_status``: what the externalized-checkpoint retention says to delete.
        Savepoints are never deleted."""
        status = str(getattr(job_status, "value", job_status))
        if status not in _DISCARD_ON_END[self.config.externalized]:
            return []
        gone, self.completed = self.completed, []
        for c in gone:
            self.stats.report_discarded(c.checkpoint_id)
        return [
            self._discard_action(c.checkpoint_id, c.external_path, self.shared_registry.unregister(c.checkpoint_id))
            for c in gone
        ]

    def _discard_action(self, checkpoint_id: int, location: str | None, shared: list[str]) -> DiscardAction:
        shared_dir = shared_location(self.config.storage_dir, self.job_id) if shared and self.config.storage_dir else None
        return DiscardAction(checkpoint_id, location, tuple(shared) if shared_dir else (), shared_dir)

    def find_request(self, request_id: str) -> CheckpointStats | None:
        """The statistics of the checkpoint or savepoint a REST request triggered, for polling its status."""
        return self.stats.find_request(request_id)


def _tid(task: Any) -> TaskId:
    vertex_id, subtask = task  # JSON turns the tuple into a list
    return (str(vertex_id), int(subtask))
