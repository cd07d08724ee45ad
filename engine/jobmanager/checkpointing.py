"""The JobManager's side of checkpointing for one job: it carries out what the
CheckpointCoordinator decides.

Triggers (periodic checkpoints, manual checkpoints, savepoints and
stop-with-savepoint) go to the source subtasks' slots, acknowledgements and
declines come back through the JobManager inbox, a completed checkpoint gets its
``_metadata`` written last, its statistics go to the JobStore (SQL), then every
task is notified (the commit point for two-phase-commit sinks) and subsumed
checkpoints are deleted. A failed checkpoint or savepoint is announced to every
task, so sources waiting on a stop-with-savepoint resume. Savepoints are never
deleted. Every job has one, even with periodic checkpointing off, because
savepoints need a coordinator too (as in Flink).
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import pickle
import threading
from typing import Any

from millstream.engine.checkpoint import stats as checkpoint_stats
from millstream.engine.checkpoint.completed_checkpoint import CompletedCheckpoint
from millstream.engine.checkpoint.config import CheckpointConfig
from millstream.engine.checkpoint.coordinator import CheckpointCoordinator, FailedCheckpoint
from millstream.engine.checkpoint.filesystem import storage_fs
from millstream.engine.checkpoint.messages import DiscardAction, NotifyAbortedAction, TaskAck, TriggerAction
from millstream.engine.checkpoint.stats_tracker import CheckpointStatsTracker
from millstream.engine.checkpoint.storage import (
    FileSystemCheckpointStorage, checkpoint_location, discard_shared, shared_location, sweep_shared,
)
from millstream.engine.executiongraph.execution_graph import ExecutionGraph
from millstream.engine.executiongraph.states import ExecutionState, JobStatus
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.jobmanager.job_store import JobStore, SavepointRecord
from millstream.engine.taskexecutor import messages
from millstream.engine.taskexecutor.gateway import TaskExecutorGateway

log = logging.getLogger("millstream.checkpointing")

SAVEPOINT_DIR_KEY = "state.savepoints.dir"  # Flink's job option for the default savepoint directory
ADOPTED_ABORT_LIMIT = 100  # in-flight checkpoint ids an adopting JobManager aborts, at most


def not_checkpointable(eg: ExecutionGraph) -> str | None:
    """Why the job cannot take a checkpoint or savepoint now, or None when it can: it runs, every
    task runs or has finished (finished ones are acknowledged on their behalf, as Flink does with
    checkpoints after tasks finish), and some source still runs to take the barrier."""
    if eg.status is not JobStatus.RUNNING:
        return f"it is {eg.status.value}"
    states = [(ejv.job_vertex.is_source, ev.current.state) for ejv, ev in eg.all_executions()]
    if any(st not in (ExecutionState.RUNNING, ExecutionState.FINISHED) for _, st in states):
        return "not all of its tasks are running yet"
    if not any(src and st is ExecutionState.RUNNING for src, st in states):
        return "every source has finished"
    return None


def _locked(method):
    """The dispatcher thread changes checkpoint statistics while REST and dashboard threads read them."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self.lock:
            return method(self, *args, **kwargs)

    return wrapper


class JobCheckpointing:
    def __init__(
        self,
        job_graph: JobGraph,
        gateway: TaskExecutorGateway | None,
        default_dir: str,
        store: JobStore | None = None,
        *,
        default_savepoint_dir: str | None = None,
        stats: CheckpointStatsTracker | None = None,
    ) -> None:
        config = CheckpointConfig.from_job_config(job_graph.config)
        if config.storage_dir is None:
            config.set_checkpoint_storage_dir(default_dir)
        self.job_id = job_graph.job_id
        self.job_graph = job_graph
        self.config = config
        self.gateway = gateway
        self.store = store
        self.coordinator = CheckpointCoordinator.for_job_graph(job_graph, config, stats=stats)
        self.storage = FileSystemCheckpointStorage(config.storage_dir or default_dir)
        configured = job_graph.config.get(SAVEPOINT_DIR_KEY)
        self.savepoint_dir: str | None = (
            str(configured).removeprefix("file://") if configured else default_savepoint_dir
        )
        # Set when failed checkpoints must fail the job; taken once by the JobMaster (take_job_failure),
        # so the job's next attempt starts with a clean slate instead of failing at once again.
        self._job_failure: str | None = None
        self.lock = threading.RLock()
        self._savepoints: dict[str, SavepointRecord] = {}  # request id -> a savepoint still in flight
        self.stop_savepoint: SavepointRecord | None = None  # a stop-with-savepoint in flight or completed
        self.cancel_requested = False  # a savepoint with cancel-job completed: the JobMaster cancels
        self._unsaved: dict[int, dict[str, Any]] = {}  # statistics SQL did not take yet
        self._restores_saved = self.coordinator.stats.num_restored

    @staticmethod
    def archived(job_graph: JobGraph, stats: CheckpointStatsTracker, default_dir: str) -> "JobCheckpointing":
        """Read-only statistics of a job this JobManager does not run (it ended before a restart)."""
        return JobCheckpointing(job_graph, None, default_dir, stats=stats)

    @property
    def enabled(self) -> bool:
        """Periodic checkpointing is on; savepoints and manual checkpoints work either way."""
        return self.config.is_checkpointing_enabled()

    @_locked
    def save_history(self) -> bool:
        """Write what the JobStore does not have yet; True once it has every statistic and restore, so
        this object may be dropped (the JobStore answers for it)."""
        self.flush_history()
        stats = self.coordinator.stats
        restore_unsaved = stats.num_restored > self._restores_saved and stats.latest_restored is not None
        return not self._unsaved and not restore_unsaved

    @property
    def has_history(self) -> bool:
        return self.coordinator.stats.num_total > 0 or self.coordinator.stats.num_restored > 0

    def _placement(self, eg: ExecutionGraph, vertex: str, subtask: int) -> tuple[str, int] | None:
        ex = eg.vertices[vertex].subtasks[subtask].current
        if ex.taskmanager_id is None or ex.slot is None:
            return None
        return ex.taskmanager_id, ex.slot

    def _slots(self, eg: ExecutionGraph, tasks: Any) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for vertex, subtask in tasks:
            where = self._placement(eg, vertex, subtask)
            if where is not None and where not in out:
                out.append(where)
        return out

    # -- triggering ---------------------------------------------------------------------
    @_locked
    def tick(self, eg: ExecutionGraph, now_ms: int) -> None:
        for failed in self.coordinator.expire(now_ms):
            self._failed(failed, eg)
        if self.enabled and self.stop_savepoint is None:
            # No periodic checkpoint once the job is stopping: sources are about to end.
            action = self.coordinator.maybe_trigger(now_ms, not_checkpointable(eg) is None)
            if action is not None:
                self._send_trigger(eg, action)
        self.flush_history()

    def _send_trigger(self, eg: ExecutionGraph, action: TriggerAction) -> None:
        # (id, timestamp, location, type, drain): the task side's Barrier wire format.
        barrier = (action.checkpoint_id, action.timestamp, action.location, action.checkpoint_type.value, action.drain)
        for vertex, subtask in action.tasks:
            where = self._placement(eg, vertex, subtask)
            if where is not None and eg.vertices[vertex].subtasks[subtask].current.state is not ExecutionState.FINISHED:
                msg = messages.trigger_checkpoint(self.job_id, eg.attempt, vertex, subtask, barrier)
                self.gateway.trigger_checkpoint(where[0], where[1], msg)  # type: ignore[union-attr]
        self._acknowledge_finished(eg, action)

    def _acknowledge_finished(self, eg: ExecutionGraph, action: TriggerAction) -> None:
        """Flink's checkpoints after tasks finished, in small: a subtask that already FINISHED cannot take
        the barrier, so it is acknowledged here with what it would have snapshotted. A finished source
        has no splits left; that is written as its state file (the task side's format), so a restore
        at the same parallelism does not read its range again. Any other finished task received all
        its input and emitted all its output: it has no state to keep. (A source subtask finishes
        early when a rescale leaves it no split.)"""
        now = action.timestamp
        for vertex, subtask in self.coordinator.tasks_to_ack:
            if eg.vertices[vertex].subtasks[subtask].current.state is not ExecutionState.FINISHED:
                continue
            handles: dict[str, Any] = {}
            offsets: dict[str, Any] = {}
            jv = self.job_graph.vertex(vertex)
            if jv.is_source and action.location:
                op_id = jv.operators[0].operator_id
                data = pickle.dumps({"splits": [], "function": None}, protocol=pickle.HIGHEST_PROTOCOL)
                try:
                    handles[op_id] = self.storage.write_task_state(
                        self.job_id, action.checkpoint_id, (vertex, subtask), op_id, data, location=action.location
                    )
                except Exception as e:
                    failed = self.coordinator.receive_decline(
                        action.checkpoint_id, (vertex, subtask), f"the state of the finished subtask could not be written: {e}", now
                    )
                    if failed is not None:
                        self._failed(failed, eg)
                    return
                offsets[op_id] = []
            ack = TaskAck(handles, 0, ack_timestamp=now, source_offsets=offsets)
            self._acknowledged(action.checkpoint_id, (vertex, subtask), ack, eg, now)

    @_locked
    def trigger_savepoint(
        self,
        eg: ExecutionGraph,
        now_ms: int,
        request_id: str,
        target_directory: str | None,
        *,
        stop: bool = False,
        drain: bool = False,
        cancel_job: bool = False,
    ) -> SavepointRecord:
        """Start a savepoint (``stop``: stop-with-savepoint). Raises CheckpointTriggerError without a
        directory, and CheckpointStorageError when the directory cannot be written."""
        chosen = target_directory or self.savepoint_dir
        target = storage_fs(chosen).absolute(chosen) if chosen else ""
        if target:
            self.storage.check_writable(target, "savepoint")
        action = self.coordinator.trigger_savepoint(now_ms, target, request_id, stop=stop, drain=drain)
        if action.duplicate and request_id in self._savepoints:
            return self._savepoints[request_id]
        record = SavepointRecord(
            jid=self.job_id,
            request_id=request_id,
            status="IN_PROGRESS",
            trigger_timestamp=now_ms,
            target_directory=target,
            checkpoint_id=action.checkpoint_id,
            checkpoint_type=action.checkpoint_type.value,
            cancel_job=cancel_job and not stop,
            drain=drain,
        )
        self._savepoints[request_id] = record
        if stop:
            self.stop_savepoint = record
        self._save_savepoint(record)
        self.flush_history()  # the IN_PROGRESS entry is durable before any task sees the barrier
        self._send_trigger(eg, action)
        return record

    @_locked
    def trigger_checkpoint(self, eg: ExecutionGraph, now_ms: int, request_id: str) -> int:
        """A checkpoint by hand (``POST /jobs/{id}/checkpoints``); the same request id triggers once."""
        action = self.coordinator.trigger_checkpoint(now_ms, request_id)
        if not action.duplicate:
            self.flush_history()
            self._send_trigger(eg, action)
        return action.checkpoint_id

    # -- acknowledgements and failures ---------------------------------------------------
    @_locked
    def on_ack(self, msg: dict[str, Any], eg: ExecutionGraph, now_ms: int) -> None:
        self._acknowledged(msg["checkpoint_id"], (msg["vertex"], msg["subtask"]), TaskAck.from_dict(msg["ack"]), eg, now_ms)

    def _acknowledged(self, checkpoint_id: int, task: tuple[str, int], ack: TaskAck, eg: ExecutionGraph, now_ms: int) -> None:
        completed = self.coordinator.receive_ack(checkpoint_id, task, ack, now_ms)
        if completed is None:
            return
        missing = self._missing_shared(completed)
        if missing:
            # A task built on a chain whose checkpoint was subsumed (and its files deleted) before it
            # heard of a newer one: this checkpoint cannot be restored. It fails; the tasks' next
            # snapshot is then a base.
            reason = f"it refers to {len(missing)} shared state file(s) already deleted, e.g. {missing[0]}"
            failed = self.coordinator.fail_finalization(completed.checkpoint_id, reason, now_ms)
            if failed is not None:
                self._failed(failed, eg)
            return
        try:
            self.storage.write_metadata(
                self.job_id, completed.checkpoint_id, completed.to_metadata(), location=completed.external_path
            )
        except Exception as e:
            failed = self.coordinator.fail_finalization(completed.checkpoint_id, f"writing _metadata failed: {e}", now_ms)
            if failed is not None:
                self._failed(failed, eg)
            return
        self._savepoint_completed(completed, now_ms)
        self.flush_history()  # the pointer is in SQL before any task commits
        for aborted in completed.notify_aborted:
            self._notify_aborted(eg, aborted)
        for tm, slot in self._slots(eg, completed.notify.tasks if completed.notify else ()):
            msg_out = messages.notify_checkpoint_complete(self.job_id, eg.attempt, completed.checkpoint_id)
            self.gateway.notify_checkpoint_complete(tm, slot, msg_out)  # type: ignore[union-attr]
        self._discard(completed.discard)

    def _missing_shared(self, completed: CompletedCheckpoint) -> list[str]:
        names = completed.shared_names()
        if not names or not self.config.storage_dir:
            return []
        shared_dir = shared_location(self.config.storage_dir, self.job_id)
        fs = storage_fs(shared_dir)
        return sorted(n for n in names if not fs.isfile(fs.join(shared_dir, n)))

    def _savepoint_completed(self, completed: CompletedCheckpoint, now_ms: int) -> None:
        record = self._savepoints.pop(completed.request_id, None) if completed.request_id else None
        if record is None:
            return
        record.status = "COMPLETED"
        record.path = completed.external_path
        record.completion_timestamp = now_ms
        self._save_savepoint(record)
        log.info("savepoint %s of job %s completed at %s", record.request_id, self.job_id, record.path)
        if record.cancel_job:
            self.cancel_requested = True

    @_locked
    def on_decline(self, msg: dict[str, Any], eg: ExecutionGraph, now_ms: int) -> None:
        failed = self.coordinator.receive_decline(
            msg["checkpoint_id"], (msg["vertex"], msg["subtask"]), msg["reason"], now_ms, bool(msg.get("not_ready"))
        )
        if failed is not None:
            self._failed(failed, eg)

    def _failed(self, failed: FailedCheckpoint, eg: ExecutionGraph | None) -> None:
        log.warning("checkpoint %d of job %s failed: %s", failed.checkpoint_id, self.job_id, failed.message)
        self._savepoint_failed(failed)
        if eg is not None:
            self._notify_aborted(eg, failed.notify_aborted)
        if failed.discard is not None:
            self._discard([failed.discard])
        if failed.should_fail_job and self._job_failure is None:
            self._job_failure = failed.job_failure_message or failed.message
        self.flush_history()

    def _savepoint_failed(self, failed: FailedCheckpoint) -> None:
        record = self._savepoints.pop(failed.request_id, None) if failed.request_id else None
        if record is None:
            return
        record.status = "FAILED"
        record.failure_cause = failed.message
        record.completion_timestamp = failed.failure_timestamp
        self._save_savepoint(record)
        if record is self.stop_savepoint:
            self.stop_savepoint = None  # the job keeps running, periodic checkpoints resume

    def _notify_aborted(self, eg: ExecutionGraph, aborted: NotifyAbortedAction) -> None:
        """Sources that hold back after a stop-with-savepoint barrier wait for this to resume."""
        if self.gateway is None:
            return
        for tm, slot in self._slots(eg, aborted.tasks):
            try:
                msg = messages.notify_checkpoint_aborted(self.job_id, eg.attempt, aborted.checkpoint_id, aborted.reason)
                self.gateway.notify_checkpoint_aborted(tm, slot, msg)
            except Exception:
                log.warning("could not tell %s/%d that checkpoint %d aborted", tm, slot, aborted.checkpoint_id, exc_info=True)

    def _discard(self, actions: Any) -> None:
        for d in actions:
            if isinstance(d, DiscardAction) and d.location:
                try:
                    self.storage.discard(d.location)
                except Exception:
                    log.warning("could not delete checkpoint %s at %s", d.checkpoint_id, d.location, exc_info=True)
            if isinstance(d, DiscardAction) and d.shared_files and d.shared_dir:
                try:  # files of incremental checkpoints no retained checkpoint refers to any more
                    discard_shared(d.shared_dir, d.shared_files)
                except Exception:
                    log.warning("could not delete shared state of checkpoint %s", d.checkpoint_id, exc_info=True)

    # -- persistence ------------------------------------------------------------------------
    def _save_savepoint(self, record: SavepointRecord) -> None:
        if self.store is None:
            return
        try:
            self.store.save_savepoint(dataclasses.replace(record))
        except Exception:
            log.exception("could not store savepoint %s of job %s", record.request_id, self.job_id)

    @_locked
    def flush_history(self) -> None:
        """Write the checkpoint statistics that changed, and a new restore, to the JobStore.
        Records SQL refuses are kept and written with the next flush."""
        stats = self.coordinator.stats
        for r in stats.take_changed_records():
            self._unsaved[int(r["id"])] = r
        if self.store is None:
            self._unsaved.clear()
            return
        if self._unsaved:
            try:
                self.store.save_checkpoints(self.job_id, [r for _, r in sorted(self._unsaved.items())])
                self._unsaved.clear()
            except Exception:
                log.exception("could not store checkpoint statistics of job %s", self.job_id)
        if stats.num_restored > self._restores_saved and stats.latest_restored is not None:
            try:
                self.store.add_checkpoint_restore(self.job_id, stats.latest_restored.to_record())
                self._restores_saved = stats.num_restored
            except Exception:
                log.exception("could not store the restore of job %s", self.job_id)

    # -- restore ------------------------------------------------------------------------------
    @_locked
    def latest_in_storage(self) -> CompletedCheckpoint | None:
        """The newest complete checkpoint (one with ``_metadata``) of this job in checkpoint storage."""
        return next(iter(self._in_storage(newest_only=True)), None)

    @_locked
    def adopt_retained_in_storage(self) -> None:
        """After a JobManager restart: every complete checkpoint of this job in storage is retained
        again, and the shared files of incremental checkpoints are counted from their ``_metadata``."""
        self.coordinator.adopt_retained(self._in_storage(newest_only=False))
        self._sweep_shared()

    def _sweep_shared(self) -> None:
        """With no checkpoint in flight (a failover, the job's end, a JobManager restart), delete the
        shared files no retained checkpoint refers to: those a failed checkpoint's tasks wrote but
        never acknowledged (a killed TaskManager's), and half-written ones."""
        if self.coordinator.pending or not self.config.storage_dir:
            return
        registry = self.coordinator.shared_registry
        try:
            gone = sweep_shared(shared_location(self.config.storage_dir, self.job_id), lambda name: name in registry)
        except OSError:
            log.warning("could not sweep the shared state files of job %s", self.job_id, exc_info=True)
            return
        if gone:
            log.info("deleted %d shared state file(s) of job %s that no checkpoint refers to", len(gone), self.job_id)

    @_locked
    def continue_adopted(self, eg: ExecutionGraph, latest: CompletedCheckpoint | None, max_seen: int) -> list[int]:
        """A new JobManager adopted the running tasks of ``eg``: checkpoint ids go on after every id
        they saw (``max_seen``); what the old JobManager left in flight after ``latest`` is aborted
        (the tasks stop aligning it, its partial directory is deleted); and ``latest`` is announced
        complete again, as Flink re-sends notifications on recovery: the old JobManager may have died
        between writing its ``_metadata`` and telling the tasks, and a two-phase-commit sink commits
        what it staged for it only then. Returns the aborted ids."""
        self.coordinator.continue_after(max_seen)
        slots = self._slots(eg, [(ejv.job_vertex.id, ev.subtask) for ejv, ev in eg.all_executions()])
        latest_id = latest.checkpoint_id if latest is not None else 0
        if latest is not None:
            for tm, slot in slots:
                msg = messages.notify_checkpoint_complete(self.job_id, eg.attempt, latest_id)
                self.gateway.notify_checkpoint_complete(tm, slot, msg)  # type: ignore[union-attr]
        # Usually one or two ids; bounded so that a long run of ids never pending here costs nothing.
        aborted = list(range(max(latest_id, max_seen - ADOPTED_ABORT_LIMIT) + 1, max_seen + 1))
        reason = "the JobManager that triggered it is gone; a new one adopted the running tasks"
        for cid in aborted:
            for tm, slot in slots:
                msg = messages.notify_checkpoint_aborted(self.job_id, eg.attempt, cid, reason)
                self.gateway.notify_checkpoint_aborted(tm, slot, msg)  # type: ignore[union-attr]
            if self.config.storage_dir:
                location = checkpoint_location(self.config.storage_dir, self.job_id, cid)
                fs = storage_fs(location)
                if not fs.isfile(fs.join(location, "_metadata")):  # never one that completed
                    try:
                        self.storage.discard(location)
                    except Exception:
                        log.warning("could not delete the partial checkpoint %s", location, exc_info=True)
        return aborted

    def _in_storage(self, newest_only: bool) -> list[CompletedCheckpoint]:
        base = self.config.storage_dir or ""
        fs = storage_fs(base)
        job_dir = fs.join(base, self.job_id)
        try:
            names = [n for n in fs.listdir(job_dir) if n.startswith("chk-") and n[4:].isdigit()]
        except OSError:
            return []
        found = []
        for name in sorted(names, key=lambda n: int(n[4:]), reverse=True):
            path = fs.join(job_dir, name)
            if not fs.isfile(fs.join(path, "_metadata")):
                continue  # in flight when the JobManager stopped
            try:
                checkpoint = CompletedCheckpoint.from_metadata(self.storage.read_metadata(path), external_path=path)
            except Exception:
                log.warning("skipping incomplete or unreadable checkpoint %s", path)
                continue
            if checkpoint.job_id != self.job_id or checkpoint.checkpoint_id != int(name[4:]):
                # A genuine _metadata copied here from another checkpoint or job (its state files are
                # checked against what it names, so they would have to be copied with it): not this one.
                log.warning(
                    "skipping %s: its _metadata is of checkpoint %s of job %s", path, checkpoint.checkpoint_id, checkpoint.job_id
                )
                continue
            found.append(checkpoint)
            if newest_only:
                break
        return found

    def read_savepoint(self, path: str) -> CompletedCheckpoint:
        """Load a savepoint (or retained checkpoint) directory; raises InvalidSavepoint saying what is wrong."""
        from millstream.engine.checkpoint.storage import InvalidSavepoint

        meta = self.storage.read_metadata(path)
        try:
            return CompletedCheckpoint.from_metadata(meta, external_path=storage_fs(path).absolute(path))
        except (KeyError, ValueError, TypeError) as e:
            raise InvalidSavepoint(path, f"_metadata is corrupt: {e}") from e

    @_locked
    def take_job_failure(self) -> str | None:
        """Why checkpoint failures must fail the job now (once), or None."""
        cause, self._job_failure = self._job_failure, None
        return cause

    @_locked
    def abort_all(self, reason: str, now_ms: int) -> None:
        """The job fails over or ends: everything in flight is aborted, and a verdict not yet acted on
        belongs to the attempt that is going away."""
        self._job_failure = None
        for failed in self.coordinator.abort_all(reason, now_ms):
            self._savepoint_failed(failed)
            if failed.discard is not None:
                self._discard([failed.discard])
        self._sweep_shared()
        self.flush_history()

    @_locked
    def on_terminal(self, status: JobStatus, now_ms: int) -> None:
        self.abort_all(f"the job is {status.value}", now_ms)
        self._discard(self.coordinator.on_job_terminal(status.value))
        self.flush_history()

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

    @_locked
    def request_status(self, request_id: str) -> dict[str, Any] | None:
        """Flink's asynchronous-operation answer for a manual checkpoint this job triggered."""
        return checkpoint_stats.savepoint_operation(self.coordinator.find_request(request_id))
