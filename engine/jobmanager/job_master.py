"""JobMaster: drives one job's ExecutionGraph: scheduling, deployment, task states, cancel and failure,
savepoints and stop-with-savepoint, and restoring from a savepoint or checkpoint.

It owns no thread; the Dispatcher calls it under its lock. Everything it does
to the outside world goes through the TaskExecutorGateway and the JobStore.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from millstream.engine.executiongraph.archived import job_record
from millstream.engine.executiongraph.execution_graph import ExecutionGraph, now_ms
from millstream.engine.executiongraph.states import ExecutionState, JobStatus
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint
from millstream.engine.checkpoint.config import parse_duration_ms
from millstream.engine.checkpoint.coordinator import CheckpointTriggerError
from millstream.engine.checkpoint.rescale import plan_restore
from millstream.engine.checkpoint.stats_tracker import CheckpointStatsTracker
from millstream.engine.executiongraph.restart_backoff import RestartBackoffTimeStrategy
from millstream.engine.jobmanager.checkpointing import JobCheckpointing, not_checkpointable
from millstream.engine.jobmanager.job_store import ExceptionRecord, JobRecord, JobStore, SavepointRecord, StoreUnavailable
from millstream.engine.jobmanager.task_reconciliation import Adoption
from millstream.engine.resourcemanager.slot_pool import SlotPool
from millstream.engine.runtime.deployment import make_tdd
from millstream.engine.scheduler.slot_assignment import NotEnoughSlots, subtask_slots
from millstream.engine.taskexecutor.gateway import TaskExecutorGateway

log = logging.getLogger("millstream.jobmaster")

CANCEL_TIMEOUT_MS = 30_000  # a task that never confirms cancellation is declared CANCELED
SAVEPOINT_PATH_KEY = "execution.savepoint.path"  # Flink's options for starting from a savepoint
ALLOW_NON_RESTORED_KEY = "execution.savepoint.ignore-unclaimed-state"
SLOT_REQUEST_TIMEOUT_KEY = "slot.request.timeout"  # Flink's option; a job may set its own
DEFAULT_SLOT_REQUEST_TIMEOUT_MS = 300_000  # Flink's default


class JobNotRunning(CheckpointTriggerError):
    """A savepoint or checkpoint was asked of a job whose tasks are not all running."""


class JobMaster:
    def __init__(
        self,
        job_graph: JobGraph,
        user_code: bytes,
        gateway: TaskExecutorGateway,
        store: JobStore,
        clock: Callable[[], float] = time.time,
        metrics_reader: Callable[[str, int], dict[tuple[str, int], dict[str, Any]]] | None = None,
        checkpoint_dir: str = "checkpoints",
        savepoint_dir: str | None = None,
        checkpoint_stats: CheckpointStatsTracker | None = None,
        slot_request_timeout_ms: int = DEFAULT_SLOT_REQUEST_TIMEOUT_MS,
    ) -> None:
        self.job_graph = job_graph
        self.user_code = user_code
        self.gateway = gateway
        self.store = store
        self.clock = clock
        self.eg = ExecutionGraph.from_job_graph(job_graph, self._now())
        self.cancel_requested_at: int | None = None
        self.slot_request_timeout_ms = _slot_request_timeout(job_graph.config, slot_request_timeout_ms)
        # When the job began asking for its slots (it entered CREATED); None once it has them.
        self.slots_requested_at: int | None = self._now()
        self.final_metrics: dict[tuple[str, int], dict[str, Any]] = {}
        self.metrics_reader = metrics_reader
        self._code_saved = False  # the user code is stored once, with the first record
        self.restart = RestartBackoffTimeStrategy.from_job_config(job_graph.config)
        self.restart_at: int | None = None  # when a RESTARTING job deploys its next attempt
        # Why the next attempt cannot deploy yet (a data server it needs is down), asked when a restart
        # is due; the Dispatcher sets it. While it says so the restart waits, up to slot.request.timeout.
        self.restart_hold: Callable[[JobGraph, int], str | None] | None = None
        self.held_since: int | None = None
        self.restore_plan: dict[tuple[str, int], Any] = {}
        # Restored from a completed stop-with-savepoint (its barrier, on the wire): the tasks end at once.
        self.finish_barrier: tuple[Any, ...] | None = None
        self.allow_non_restored_state = _truthy(job_graph.config.get(ALLOW_NON_RESTORED_KEY))
        # Always there: savepoints need the coordinator even when periodic checkpointing is off.
        self.checkpointing = JobCheckpointing(
            job_graph, gateway, checkpoint_dir, store, default_savepoint_dir=savepoint_dir, stats=checkpoint_stats
        )

    @property
    def job_id(self) -> str:
        return self.job_graph.job_id

    @property
    def status(self) -> JobStatus:
        return self.eg.status

    def _now(self) -> int:
        return now_ms(self.clock)

    # -- scheduling ------------------------------------------------------------
    def try_schedule(self, pool: SlotPool) -> bool:
        if self.eg.status is not JobStatus.CREATED:
            return False
        try:
            slots = pool.allocate(self.job_id, self.job_graph.max_parallelism)
        except NotEnoughSlots as e:
            if self.eg.status_message != str(e):
                self.eg.status_message = str(e)
            return False
        self.eg.status_message = None
        self.slots_requested_at = None
        at = self._now()
        placement = subtask_slots({v.id: v.parallelism for v in self.job_graph.vertices}, slots)
        self.gateway.upload_user_code(self.job_id, self.user_code)
        self.eg.transition(JobStatus.RUNNING, at)
        for ejv, ev in self.eg.all_executions():
            slot = placement[(ejv.job_vertex.id, ev.subtask)]
            ex = ev.current
            ex.taskmanager_id, ex.slot = slot.taskmanager_id, slot.index
            ex.transition(ExecutionState.SCHEDULED, at)
            ex.transition(ExecutionState.DEPLOYING, at)
            restore = self.restore_plan.get((ejv.job_vertex.id, ev.subtask))
            tdd = make_tdd(
                self.job_graph, ejv.job_vertex.id, ev.subtask, self.eg.attempt, restore.to_dict() if restore else None,
                self.finish_barrier,
            )
            self.gateway.submit_task(slot.taskmanager_id, slot.index, tdd)
        self.persist()
        return True

    def _check_slot_request_timeout(self, pool: SlotPool) -> None:
        """Flink's slot.request.timeout: a job that waited that long for its slots fails with
        NoResourceAvailableException (it holds none: slots are taken all at once or not at all)."""
        if self.eg.status is not JobStatus.CREATED or self.slots_requested_at is None:
            return
        now = self._now()
        if now - self.slots_requested_at < self.slot_request_timeout_ms:
            return
        needed, free, total = self.job_graph.max_parallelism, pool.available_slots(), pool.total_slots()
        cause = (
            "NoResourceAvailableException: Could not acquire the minimum required resources: the job needs "
            f"{needed} slot{'s' if needed != 1 else ''} and the cluster has {free} free of {total}, after waiting "
            f"{self.slot_request_timeout_ms} ms (slot.request.timeout)"
        )
        log.warning("job %s fails: %s", self.job_id, cause)
        self.store.add_exception(ExceptionRecord(self.job_id, now, "NoResourceAvailableException", cause))
        for _, ev in self.eg.all_executions():
            if not ev.current.state.is_terminal():
                ev.current.transition(ExecutionState.FAILED, now)
                ev.current.failure = cause
        self.eg.status_message = None
        self.slots_requested_at = None
        self.fail(cause)  # from CREATED: FAILING, never a restart (Flink's restart would only wait again)
        self.check_completion(pool)

    # -- events ----------------------------------------------------------------
    def on_task_state(self, msg: dict[str, Any], pool: SlotPool) -> None:
        if msg["attempt"] != self.eg.attempt or self.eg.status.is_terminal():
            return  # a message from an earlier attempt, or after the end
        ejv = self.eg.vertices.get(msg["vertex"])
        if ejv is None or not 0 <= msg["subtask"] < len(ejv.subtasks):
            return
        ex = ejv.subtasks[msg["subtask"]].current
        target = ExecutionState(msg["state"])
        if target is ExecutionState.FINISHED and ex.state is ExecutionState.CANCELING:
            # It ended before the cancel reached it: as in Flink, that completes the cancellation
            # (else the job would wait CANCEL_TIMEOUT_MS for a CANCELED that never comes).
            target = ExecutionState.CANCELED
        if not ex.transition(target, msg["ts"]):
            return
        if target is ExecutionState.FAILED:
            ex.failure = msg.get("error")
            self.store.add_exception(
                ExceptionRecord(
                    jid=self.job_id,
                    timestamp=msg["ts"],
                    exception_name=msg.get("exception_name") or "Exception",
                    stacktrace=msg.get("error") or "",
                    task_name=f"{ejv.job_vertex.name} ({msg['subtask'] + 1}/{ejv.job_vertex.parallelism})",
                    vertex_id=msg["vertex"],
                    subtask=msg["subtask"],
                    attempt=msg["attempt"],
                    endpoint=msg.get("tm"),
                    taskmanager_id=msg.get("tm"),
                )
            )
            self.fail(_last_line(msg.get("error")) or "task failed")
        self.check_completion(pool)

    def on_taskmanager_lost(self, tm_id: str, reason: str, pool: SlotPool) -> None:
        at = self._now()
        hit = False
        for ejv, ev in self.eg.all_executions():
            ex = ev.current
            if ex.taskmanager_id == tm_id and not ex.state.is_terminal():
                ex.transition(ExecutionState.FAILED, at)
                ex.failure = reason
                hit = True
        if hit:
            self.store.add_exception(
                ExceptionRecord(
                    jid=self.job_id,
                    timestamp=at,
                    exception_name="TaskManagerLostException",
                    stacktrace=reason,
                    endpoint=tm_id,
                    taskmanager_id=tm_id,
                )
            )
            self.fail(reason)
            self.check_completion(pool)

    def on_slot_lost(self, tm_id: str, slot: int, reason: str, pool: SlotPool) -> None:
        at = self._now()
        hit = False
        for ejv, ev in self.eg.all_executions():
            ex = ev.current
            if ex.taskmanager_id == tm_id and ex.slot == slot and not ex.state.is_terminal():
                ex.transition(ExecutionState.FAILED, at)
                ex.failure = reason
                hit = True
        if hit:
            self.store.add_exception(
                ExceptionRecord(self.job_id, at, "SlotLostException", reason, endpoint=tm_id, taskmanager_id=tm_id)
            )
            self.fail(reason)
            self.check_completion(pool)

    def on_redis_lost(self, reason: str, pool: SlotPool) -> None:
        """Redis came back as a new, empty server. The running attempt's channels are gone, and so may
        be its tasks' last reports, so no confirmation is awaited: its tasks are told to stop and
        counted as failed at once, and the job restarts from its latest checkpoint."""
        at = self._now()
        targets: set[tuple[str, int]] = set()
        for _, ev in self.eg.all_executions():
            ex = ev.current
            if ex.state.is_terminal():
                continue
            if ex.taskmanager_id is not None:
                targets.add((ex.taskmanager_id, ex.slot))  # type: ignore[arg-type]
            canceling = ex.state is ExecutionState.CANCELING
            ex.transition(ExecutionState.CANCELED if canceling else ExecutionState.FAILED, at)
            if not canceling:
                ex.failure = reason
        if not targets:
            return
        self.store.add_exception(ExceptionRecord(self.job_id, at, "RedisConnectionLost", reason))
        self.fail(reason)
        for tm, slot in targets:
            self.gateway.cancel_job(tm, slot, self.job_id, self.eg.attempt)
        self.check_completion(pool)

    # -- transitions -------------------------------------------------------------
    def _cancel_tasks(self) -> None:
        at = self._now()
        targets: set[tuple[str, int]] = set()
        for _, ev in self.eg.all_executions():
            ex = ev.current
            if ex.state.is_terminal():
                continue
            if ex.taskmanager_id is None:
                ex.transition(ExecutionState.CANCELED, at)
            else:
                ex.transition(ExecutionState.CANCELING, at)
                targets.add((ex.taskmanager_id, ex.slot))  # type: ignore[arg-type]
        for tm, slot in targets:
            self.gateway.cancel_job(tm, slot, self.job_id, self.eg.attempt)
        self.cancel_requested_at = at

    def fail(self, cause: str) -> None:
        """A task or TaskManager failed: restart from the latest checkpoint if the strategy allows, else fail."""
        if self.eg.status not in (JobStatus.RUNNING, JobStatus.CREATED):
            return
        now = self._now()
        self.eg.failure_cause = cause
        self.restart.notify_failure(now)
        if self.eg.status is JobStatus.RUNNING and self.restart.can_restart(now):
            log.info("job %s failed (%s); restarting", self.job_id, cause)
            self.eg.transition(JobStatus.RESTARTING, now)
            self.checkpointing.abort_all(f"the job is restarting: {cause}", now)
        else:
            self.eg.transition(JobStatus.FAILING, now)
        self._cancel_tasks()
        self.persist()

    def cancel(self, pool: SlotPool) -> bool:
        """Request cancellation; False if the job already ended."""
        if self.eg.status.is_terminal():
            return False
        if self.eg.status in (JobStatus.CANCELLING, JobStatus.FAILING):
            return True
        self.eg.transition(JobStatus.CANCELLING, self._now())
        self._cancel_tasks()
        self.persist()
        self.check_completion(pool)
        return True

    def check_completion(self, pool: SlotPool) -> None:
        if self.eg.status.is_terminal() or not self.eg.all_in(
            ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED
        ):
            return
        at = self._now()
        if self.eg.status is JobStatus.RESTARTING:
            if self.restart_at is None:
                # Every task of the failed attempt has stopped: free its slots and wait out the backoff.
                pool.release(self.job_id)
                self.restart_at = at + self.restart.backoff_ms()
            return
        if self.eg.status is JobStatus.RUNNING:
            target = JobStatus.FINISHED
        elif self.eg.status is JobStatus.FAILING:
            target = JobStatus.FAILED
        else:
            target = JobStatus.CANCELED
        self.eg.transition(target, at)
        self.checkpointing.on_terminal(target, at)
        if self.metrics_reader is not None:
            try:
                self.final_metrics = self.metrics_reader(self.job_id, self.eg.attempt)
            except Exception:
                log.warning("could not read final metrics of job %s", self.job_id, exc_info=True)
        pool.release(self.job_id)
        try:
            self.gateway.release_job(self.job_id)
        except Exception:
            log.warning("could not clean up Redis keys of job %s", self.job_id, exc_info=True)
        self.persist()

    def on_checkpoint_message(self, msg: dict[str, Any]) -> None:
        if msg["attempt"] != self.eg.attempt or self.eg.status.is_terminal():
            return
        if msg["type"] == "checkpoint_ack":
            self.checkpointing.on_ack(msg, self.eg, self._now())
        else:
            self.checkpointing.on_decline(msg, self.eg, self._now())
        self._fail_on_checkpoint_failures()

    # -- savepoints ----------------------------------------------------------------
    def _require_running(self, what: str) -> None:
        reason = not_checkpointable(self.eg)
        if reason is not None:
            raise JobNotRunning(f"cannot take a {what} of job {self.job_id}: {reason}")

    def trigger_savepoint(
        self, request_id: str, target_directory: str | None, *, stop: bool = False, drain: bool = False,
        cancel_job: bool = False,
    ) -> SavepointRecord:
        """A savepoint, or with ``stop`` a stop-with-savepoint: once it completes the sources end
        (after MAX_WATERMARK with ``drain``) and the job finishes. ``cancel_job`` cancels the job
        after the savepoint completes. A failed savepoint leaves the job running."""
        self._require_running("stop-with-savepoint" if stop else "savepoint")
        stopping = self.checkpointing.stop_savepoint
        if stopping is not None and stopping.request_id != request_id:
            raise JobNotRunning(f"job {self.job_id} is already stopping with savepoint {stopping.request_id}")
        return self.checkpointing.trigger_savepoint(
            self.eg, self._now(), request_id, target_directory, stop=stop, drain=drain, cancel_job=cancel_job
        )

    def trigger_checkpoint(self, request_id: str) -> int:
        self._require_running("checkpoint")
        return self.checkpointing.trigger_checkpoint(self.eg, self._now(), request_id)

    def restore_from_savepoint(self, path: str, allow_non_restored_state: bool) -> CompletedCheckpoint:
        """Before the first deployment: every task starts from the savepoint at ``path``, its state
        redistributed when the parallelism changed. Raises InvalidSavepoint for a missing or corrupt
        savepoint and NonRestoredStateError (naming the operator) for state no operator takes."""
        savepoint = self.checkpointing.read_savepoint(path)
        self._restore_from(savepoint, allow_non_restored_state)
        return savepoint

    def _restore_from(self, checkpoint: CompletedCheckpoint, allow_non_restored_state: bool) -> None:
        plan = plan_restore(checkpoint, self.checkpointing.coordinator.operators, allow_non_restored_state)
        self.allow_non_restored_state = allow_non_restored_state
        self.restore_plan = plan
        self.checkpointing.coordinator.restore_from(checkpoint, self._now())

    def _fail_on_checkpoint_failures(self) -> None:
        cause = self.checkpointing.take_job_failure()
        if cause and self.eg.status is JobStatus.RUNNING:
            self.store.add_exception(ExceptionRecord(self.job_id, self._now(), "CheckpointException", cause))
            self.fail(cause)

    def resume_from_latest_checkpoint(self, attempt: int, start_time: int) -> bool:
        """After a JobManager restart: start over as ``attempt`` from the newest of the completed
        checkpoints in checkpoint storage, this job's completed savepoints, and the savepoint it
        was started from. False when there is none."""
        latest = self._latest_restorable()
        if latest is None:
            return False
        now = self._now()
        self.checkpointing.adopt_retained_in_storage()  # before restore_from, which then keeps it retained
        self.checkpointing.coordinator.restore_from(latest, now)
        self.restore_plan = plan_restore(latest, self.checkpointing.coordinator.operators, self.allow_non_restored_state)
        self.eg.timestamps[JobStatus.CREATED.value] = start_time
        self.eg.start_time = start_time
        for _ in range(attempt):
            self.eg.reset_for_restart(now)
        self._end_as_requested(latest.checkpoint_id)
        log.info("job %s resumes as attempt %d from checkpoint %d", self.job_id, attempt, latest.checkpoint_id)
        return True

    def adopt(self, adoption: Adoption, record: JobRecord, pool: SlotPool) -> str | None:
        """After a JobManager takeover or restart: take over the attempt whose tasks still run
        (``task_reconciliation.reconcile`` found every one) instead of redeploying it. The
        ExecutionGraph is rebuilt at that attempt with the reported placement, the slots are taken
        in the pool, and checkpointing continues from the latest completed checkpoint. Returns why
        not (nothing sent, no slot taken; the caller restarts the job instead), or None."""
        latest = self._latest_restorable()
        self._end_as_requested(latest.checkpoint_id if latest is not None else None)
        if self.finish_barrier is not None or self.checkpointing.cancel_requested:
            return "its latest savepoint ends the job"  # the restart path finishes or cancels it
        taken = [(tm, slot) for tm, slot in adoption.slots if pool.is_allocated(tm, slot)]
        if taken:
            return f"slot {taken[0][1]} of TaskManager {taken[0][0]} is taken by another job"
        now = self._now()
        pool.assign(self.job_id, adoption.slots)
        self.checkpointing.adopt_retained_in_storage()
        if latest is not None:
            self.checkpointing.coordinator.keep_as_fallback(latest)  # the next failover returns to it
        self.eg.timestamps[JobStatus.CREATED.value] = record.start_time
        self.eg.start_time = record.start_time
        for _ in range(adoption.attempt):
            self.eg.reset_for_restart(now)
        for ejv, ev in self.eg.all_executions():
            ex = ev.current
            ex.taskmanager_id, ex.slot = adoption.placement[(ejv.job_vertex.id, ev.subtask)]
            for state in (ExecutionState.SCHEDULED, ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING):
                ex.transition(state, now)
        self.eg.transition(JobStatus.RUNNING, now)
        if JobStatus.RUNNING.value in record.timestamps:  # running since the old JobManager said so
            self.eg.timestamps[JobStatus.RUNNING.value] = record.timestamps[JobStatus.RUNNING.value]
        self.slots_requested_at = None
        aborted = self.checkpointing.continue_adopted(self.eg, latest, adoption.max_checkpoint_seen)
        for tm, slot, attempt in adoption.stale:  # older attempts left running: they go now
            self.gateway.cancel_job(tm, slot, self.job_id, attempt)
        log.info(
            "job %s: adopted attempt %d running in %d slot(s); checkpoints continue after %d (latest completed %s%s)%s",
            self.job_id, adoption.attempt, len(adoption.slots), self.checkpointing.coordinator.next_checkpoint_id - 1,
            latest.checkpoint_id if latest is not None else "none",
            f", aborted {aborted}" if aborted else "",
            f"; {len(adoption.finished)} task(s) finished while no JobManager led" if adoption.finished else "",
        )
        # Their FINISHED reports went to the JobManager that died: applied now, as they would have been
        # (the job finishes here when every task had).
        for vertex, subtask in adoption.finished:
            tm, slot = adoption.placement[(vertex, subtask)]
            self.on_task_state(
                {"attempt": adoption.attempt, "vertex": vertex, "subtask": subtask, "state": "FINISHED", "ts": now,
                 "tm": tm, "slot": slot}, pool,
            )
        return None

    def resume_from_scratch(self, attempt: int, start_time: int) -> None:
        """After a JobManager failover, a job with nothing to restore from starts over as ``attempt``, as
        Flink's HA does from its JobGraph store (and as a restart without a checkpoint does): no
        checkpoint completed, so an exactly-once sink committed nothing yet."""
        now = self._now()
        self.eg.timestamps[JobStatus.CREATED.value] = start_time
        self.eg.start_time = start_time
        for _ in range(attempt):
            self.eg.reset_for_restart(now)
        log.info("job %s starts over as attempt %d: it has no completed checkpoint", self.job_id, attempt)

    def _end_as_requested(self, restored_id: int | None, savepoints: list[SavepointRecord] | None = None) -> None:
        """Restored from a savepoint that was to end the job: a stop-with-savepoint finishes it at once
        (the tasks restore, commit what the savepoint staged, and end, draining only if the stop did),
        and a savepoint with cancel-job cancels it, as they would have without the restart."""
        self.finish_barrier = None
        if restored_id is None:
            return
        for r in self.store.list_savepoints(self.job_id) if savepoints is None else savepoints:
            if r.status != "COMPLETED" or r.checkpoint_id != restored_id:
                continue
            if r.is_stop:
                self.finish_barrier = (r.checkpoint_id, r.trigger_timestamp, r.path, r.checkpoint_type, r.drain)
                self.checkpointing.stop_savepoint = r  # no periodic checkpoint while the job ends
                log.info("job %s restored from its stop-with-savepoint %s: it finishes", self.job_id, r.request_id)
            elif r.cancel_job:
                self.checkpointing.cancel_requested = True
            return

    def _latest_restorable(self) -> CompletedCheckpoint | None:
        candidates = [self.checkpointing.latest_in_storage()]
        paths = [r.path for r in self.store.list_savepoints(self.job_id) if r.status == "COMPLETED" and r.path]
        if self.job_graph.config.get(SAVEPOINT_PATH_KEY):
            paths.append(str(self.job_graph.config[SAVEPOINT_PATH_KEY]))
        for path in paths:
            try:
                candidates.append(self.checkpointing.read_savepoint(path))
            except Exception:
                log.warning("job %s cannot resume from savepoint %s", self.job_id, path, exc_info=True)
        return max((c for c in candidates if c is not None), key=lambda c: c.checkpoint_id, default=None)

    def _restart(self, pool: SlotPool) -> None:
        """Deploy a new attempt of every task, restored from the latest completed checkpoint."""
        # Read first: with SQL away this raises before anything changed, and the restart waits.
        savepoints = self.store.list_savepoints(self.job_id)
        self.eg.status_message = None
        at = self._now()
        old_attempt = self.eg.attempt
        self.restart.on_restart()
        self.restart_at = None
        self.cancel_requested_at = None
        self.restore_plan = {}
        latest = self.checkpointing.coordinator.restore_latest(at)
        if latest is not None:
            self.restore_plan = plan_restore(
                latest, self.checkpointing.coordinator.operators, self.allow_non_restored_state
            )
        restored = next(iter(self.restore_plan.values())).checkpoint_id if self.restore_plan else None
        self._end_as_requested(restored, savepoints)
        log.info(
            "job %s restarts as attempt %d from %s",
            self.job_id,
            old_attempt + 1,
            f"checkpoint {restored}" if restored is not None else "the beginning (no completed checkpoint)",
        )
        self.eg.reset_for_restart(at)
        try:
            self.gateway.release_attempt(self.job_id, old_attempt)
        except Exception:
            log.warning("could not drop the channels of attempt %d of job %s", old_attempt, self.job_id, exc_info=True)
        self.eg.transition(JobStatus.CREATED, at)
        self.slots_requested_at = at
        self.persist()
        self.try_schedule(pool)

    def _restart_held(self) -> bool:
        """Whether a due restart waits. Flink counts a restart whose deployment fails against the
        restart strategy; one that is known to fail (its channels' data server is down) is not made
        at all, so an outage costs the one failure that revealed it, not one per backoff. After
        slot.request.timeout the restart goes ahead anyway (and, failing, counts), as a Flink job
        waiting that long for resources would fail."""
        reason = self.restart_hold(self.job_graph, self.eg.attempt + 1) if self.restart_hold is not None else None
        now = self._now()
        if reason is None:
            if self.held_since is not None:
                log.info("job %s restarts after waiting %d ms for its data servers", self.job_id, now - self.held_since)
                self.held_since, self.eg.status_message = None, None
            return False
        if self.held_since is None:
            self.held_since = now
            self.eg.status_message = f"waiting to restart: {reason}"
            log.warning("job %s waits to restart: %s", self.job_id, reason)
            return True
        if now - self.held_since < self.slot_request_timeout_ms:
            return True
        log.warning(
            "job %s restarts although %s: it waited %d ms (slot.request.timeout)", self.job_id, reason, now - self.held_since
        )
        self.held_since, self.eg.status_message = None, None
        return False

    def tick(self, pool: SlotPool) -> None:
        """Periodic duties: checkpoints, restarts after their backoff, and giving up on tasks
        that never confirm cancellation."""
        if self.eg.status is JobStatus.RESTARTING and self.restart_at is not None and self._now() >= self.restart_at:
            if not self._restart_held():
                try:
                    self._restart(pool)
                except StoreUnavailable as e:  # raised before anything changed: tried again next tick
                    if self.eg.status_message is None:
                        log.warning("job %s waits to restart: %s", self.job_id, e)
                    self.eg.status_message = f"waiting to restart: {e}"
            return
        self._check_slot_request_timeout(pool)
        if self.eg.status is JobStatus.RUNNING:
            self.checkpointing.tick(self.eg, self._now())
            self._fail_on_checkpoint_failures()
            if self.checkpointing.cancel_requested:  # a savepoint with cancel-job=true completed
                self.checkpointing.cancel_requested = False
                log.info("job %s is cancelled after its savepoint, as requested", self.job_id)
                self.cancel(pool)
                return
        else:
            self.checkpointing.flush_history()
        if self.cancel_requested_at is None or self.eg.status.is_terminal():
            return
        if self._now() - self.cancel_requested_at < CANCEL_TIMEOUT_MS:
            return
        at = self._now()
        for _, ev in self.eg.all_executions():
            if not ev.current.state.is_terminal():
                ev.current.transition(ExecutionState.CANCELED, at)
        self.check_completion(pool)

    # -- persistence -------------------------------------------------------------
    def record(self, metrics: dict[tuple[str, int], dict[str, Any]] | None = None) -> JobRecord:
        code = None if self._code_saved else self.user_code
        return job_record(self.job_graph, self.eg, metrics or self.final_metrics, code)

    def persist(self) -> None:
        self.store.save_job(self.record())
        self._code_saved = True


def _slot_request_timeout(config: dict[str, Any], default_ms: int) -> int:
    """The job's own slot.request.timeout (Flink's duration syntax), else the cluster's."""
    value = config.get(SLOT_REQUEST_TIMEOUT_KEY)
    if value is None:
        return default_ms
    try:
        ms = parse_duration_ms(value)
    except ValueError:
        log.warning("ignoring %s=%r: not a duration; using %d ms", SLOT_REQUEST_TIMEOUT_KEY, value, default_ms)
        return default_ms
    return ms if ms > 0 else default_ms


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes") if value is not None else False


def _last_line(text: str | None) -> str | None:
    if not text:
        return None
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else None
