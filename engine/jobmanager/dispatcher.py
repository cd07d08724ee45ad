"""Dispatcher: accepts jobs, runs one JobMaster each, and drives them from one control loop.

It is also the service the REST API and the dashboard call for savepoints,
stop-with-savepoint, manual checkpoints and checkpoint history (live, or read
back from the JobStore for jobs that ended before this JobManager started).

Jobs that ended leave memory ``archive_after_ms`` after their end, once their
record and checkpoint history are in SQL: from then on every read of them
(REST, dashboard, savepoint and checkpoint status) is answered from the
JobStore, as after a JobManager restart, so a long-lived JobManager holds only
live jobs and the recently ended, not every job (and its user code) it ever ran.

The loop reads task reports from the JobManager inbox in Redis, refreshes
TaskManager membership every heartbeat interval, fails jobs whose TaskManager
vanished, and starts jobs that were waiting for slots. Redis going away does not
stop the loop; a Redis that comes back as a new server (its run_id changed) has
lost every channel, so each running job fails over to its latest checkpoint. REST handlers call in
under the same lock, so every state change happens one at a time.

With high availability a Dispatcher lives for one term of leadership: it is given the lease's
fenced Redis writes and a ``leadership`` check, and its loop ends (the job masters with it, their
tasks left running for the next leader to take over) as soon as the check fails or a write is
fenced out. A standby JobManager keeps an unstarted Dispatcher that answers reads from the JobStore.
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import os
import threading
import time
import uuid
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import redis

from millstream.engine import redis_keys
from millstream.engine.executiongraph.states import JobStatus
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.graph.stream_graph import UPPER_MAX_PARALLELISM
from millstream.engine.checkpoint.rescale import StateRestoreError
from millstream.engine.checkpoint.stats_tracker import DEFAULT_HISTORY_SIZE, CheckpointStatsTracker
from millstream.engine.checkpoint.filesystem import storage_fs
from millstream.engine.checkpoint.storage import InvalidSavepoint
from millstream.engine.jobmanager.checkpointing import JobCheckpointing
from millstream.engine.jobmanager.data_server_monitor import DEFAULT_INTERVAL_MS, DataServerMonitor, DataServerState
from millstream.engine.jobmanager.leader_election import FencedOut
from millstream.engine.jobmanager.job_master import ALLOW_NON_RESTORED_KEY, SAVEPOINT_PATH_KEY, JobMaster
from millstream.engine.jobmanager.savepoints import OperationRejected, SavepointOperations
from millstream.engine.jobmanager.task_reconciliation import TaskOffers, reconcile
from millstream.engine.spark.availability import spark_unavailable_reason
from millstream.engine.spark.spark_cancel import spark_cancel_value
from millstream.engine.spark.spark_job_master import SparkJobMaster
from millstream.engine.spark.validation import UntranslatableJob
from millstream.engine.jobmanager.job_output import keep_output
from millstream.engine.jobmanager.job_store import TERMINAL_STATES, ExceptionRecord, JobOutputRecord, JobRecord, JobStore
from millstream.engine.jobmanager.write_behind_store import WriteBehindJobStore
from millstream.engine.runtime.collect import Ack
from millstream.engine.security.replay import ElementPositions
from millstream.engine.runtime.io.redis_collect import CollectPositions, expire_results, fetch_batch, record_ack
from millstream.engine.jobmanager.stream_marks import StoredCollectMarks, StoredStdoutMarks
from millstream.engine.runtime.latency_markers import INTERVAL_OPTION as LATENCY_INTERVAL_KEY
from millstream.engine.resourcemanager.resource_manager import ResourceManager
from millstream.engine.resourcemanager.slot_pool import SlotPool
from millstream.engine.security.replay import ReplayWindow
from millstream.engine.taskexecutor import messages
from millstream.engine.runtime.io import data_servers
from millstream.engine.taskexecutor.gateway import RedisTaskExecutorGateway

log = logging.getLogger("millstream.dispatcher")


class JobSubmissionError(ValueError):
    """The submitted job cannot run; the message says why (answered with 400)."""


__all__ = ["Dispatcher", "DispatcherConfig", "JobSubmissionError", "OperationRejected", "TooManyJobs", "UnknownJob"]


class DuplicateJobSubmission(JobSubmissionError):
    """A job with this id exists already (answered with 409): a client that retried a submission whose
    answer it lost sees that its first try got through."""


class TooManyJobs(JobSubmissionError):
    """The cluster already runs its configured maximum of concurrent jobs (answered with 429)."""


class UnknownJob(KeyError):
    pass



@dataclass(frozen=True)
class DispatcherConfig:
    heartbeat_interval_ms: int = 1000
    heartbeat_timeout_ms: int = 10_000
    max_parallelism: int = UPPER_MAX_PARALLELISM
    batch_engine: str = "spark"  # BATCH jobs: "spark", or "native" (a job may override with execution.batch-engine)
    spark_master: str = "local[*]"
    spark_conf: tuple[tuple[str, str], ...] = ()  # Spark settings every BATCH job's driver gets, e.g. spark.driver.host
    redis_url: str = "redis://127.0.0.1:6379/0"  # for Spark driver processes
    checkpoint_dir: str = "checkpoints"  # where checkpoints go when a job names no directory
    savepoint_dir: str | None = None  # where savepoints go when neither the request nor the job names one
    cluster_secret: str | None = None  # signs user code in Redis; TaskManagers refuse anything else
    max_concurrent_jobs: int | None = None  # jobs not yet in a terminal state; None: no limit
    archive_after_ms: int = 60_000  # an ended job leaves memory for the JobStore this long after its end
    checkpoints_history: int = DEFAULT_HISTORY_SIZE  # Flink's web.checkpoints.history: checkpoints a job's REST history lists
    latency_interval_ms: int = 0  # Flink's metrics.latency.interval for jobs that set none; 0: off
    data_redis_urls: tuple[str, ...] = ()  # data servers channels are sharded over; empty: the control Redis
    slot_request_timeout_ms: int = 300_000  # Flink's slot.request.timeout for jobs that set none
    # After a takeover or restart: how long to wait for every slot to say what it runs before the
    # jobs whose tasks were not all reported are restarted from their checkpoints instead of adopted.
    task_offer_timeout_ms: int = 3000
    data_server_check_interval_ms: int = DEFAULT_INTERVAL_MS  # how often the leader PINGs each data server


class Dispatcher(SavepointOperations):
    def __init__(
        self,
        client: redis.Redis,
        store: JobStore,
        config: DispatcherConfig = DispatcherConfig(),
        clock: Callable[[], float] = time.time,
        writes: Any = None,
        leadership: Callable[[], bool] | None = None,
        epoch: int | None = None,
    ) -> None:
        self.client = client
        # Writes wait in memory while SQL is away, so running jobs never do (write_behind_store.py).
        self.store = store if isinstance(store, WriteBehindJobStore) else WriteBehindJobStore(store)
        self.config = config
        self.clock = clock
        # HA: control writes go through the lease's fence (leader_election.FencedRedis); reads do not.
        self.writes = writes if writes is not None else client
        self.leadership = leadership
        self.stepped_down = False
        # This JobManager's epoch (a number from SQL, larger at every start; with HA the lease's token):
        # every message to its inbox must be sealed for it, so none from before a restart acts again.
        self.epoch = epoch
        # Short timeouts: a data server that is down must not stall the control loop while it drops channels.
        data_clients = [
            redis.Redis.from_url(u, socket_connect_timeout=2, socket_timeout=5) for u in config.data_redis_urls
        ]
        self.gateway = RedisTaskExecutorGateway(self.writes, config.cluster_secret, epoch, data_clients)
        self.data_monitor: DataServerMonitor | None = None  # started with the loop: only a leader watches
        self.pool = SlotPool()
        self.rm = ResourceManager(client, self.pool, config.cluster_secret, config.heartbeat_timeout_ms)
        # a genuine report pushed again acts once, and one sealed for an earlier JobManager never
        self._replay = ReplayWindow(redis_keys.JOBMANAGER_INBOX, epoch=epoch)
        self.jobs: dict[str, JobMaster] = {}
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started_ms = int(clock() * 1000)
        self.redis_run_id: str | None = None  # the Redis server this JobManager's jobs' data lives in
        self.redis_failovers = 0  # times Redis came back empty and running jobs were failed over
        # which entry each result offset holds, for the jobs read most recently (ended ones included)
        self._collect_positions: OrderedDict[str, CollectPositions] = OrderedDict()
        self._metric_samples: dict[str, dict[bytes, dict[str, Any]]] = {}  # job -> field -> newest sample read
        # which numbered line each print-stream position holds, for the jobs read most recently
        self._stdout_positions: OrderedDict[str, ElementPositions] = OrderedDict()
        self._outputs_kept: set[str] = set()  # ended jobs whose print() output the JobStore has taken
        self._output_retry: dict[str, float] = {}  # when to try again to keep a job's output (monotonic)

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> None:
        self._await_redis()
        if self.epoch is not None:  # before any deploy: TaskManagers seal slot_lost reports with it
            messages.publish_epoch(self.writes, self.config.cluster_secret, self.epoch)
        self._publish_data_servers()
        if self.config.data_redis_urls:
            self.data_monitor = DataServerMonitor.for_urls(
                self.config.data_redis_urls, [data_servers.address(u) for u in self.config.data_redis_urls],
                self.config.data_server_check_interval_ms,
            )
            self.data_monitor.start()
        self._recover_jobs()
        self._thread = threading.Thread(target=self._loop, name="dispatcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        if self.data_monitor is not None:
            self.data_monitor.stop()
        for data in self.gateway.data_clients:  # a Dispatcher lives one term under HA: no pools left behind
            data.close()

    def _recover_jobs(self) -> None:
        """Jobs that were running when a previous JobManager died: a streaming job whose tasks all
        still run is adopted as it runs (engine/jobmanager/task_reconciliation.py). Otherwise its old
        tasks are stopped, and a streaming job with a completed checkpoint resumes from it as a new
        attempt. Any other is recorded as failed."""
        with self.lock:
            self._note_joined(self.rm.refresh().joined)
            unfinished = self.store.list_jobs(unfinished_only=True)  # not the whole history
            running = {r.jid for r in unfinished if r.job_type != "BATCH" and r.state == JobStatus.RUNNING.value}
            offers = self._gather_task_offers() if running else TaskOffers()
            for rec in unfinished:
                self._fail_interrupted_savepoints(rec.jid)
                if rec.jid in running and self._adopt(rec, offers):
                    continue
                for tm in self.pool.taskmanagers.values():
                    for slot in range(tm.slots):
                        self.gateway.cancel_job(tm.id, slot, rec.jid, 1 << 30)
                if rec.job_type != "BATCH" and self._resume(rec):
                    continue
                if rec.job_type == "BATCH":
                    # Spark drivers run in their own session and outlive us: tell them to stop.
                    self.writes.set(
                        redis_keys.spark_cancel(rec.jid), spark_cancel_value(self.config.cluster_secret, rec.jid), ex=3600
                    )
                now = int(self.clock() * 1000)
                rec.state = JobStatus.FAILED.value
                rec.end_time = now
                rec.last_modification = now
                rec.timestamps[JobStatus.FAILED.value] = now
                rec.failure_cause = "the JobManager restarted while this job was running"
                self.store.save_job(rec)
                self.gateway.release_job(rec.jid)
                self._keep_output(rec.jid)

    def _await_redis(self) -> None:
        """A JobManager started while Redis is away waits for it (with backoff) rather than dying."""
        delay = 0.1
        while not self._stop.is_set():
            try:
                self.redis_run_id = _run_id(self.client)
                return
            except (redis.AuthenticationError, redis.exceptions.AuthorizationError):
                raise  # a wrong password or ACL is a configuration error, not an outage to wait out
            except redis.RedisError as e:
                log.warning("waiting for Redis: %s", e)
                self._stop.wait(delay)
                delay = min(delay * 2, 2.0)

    def data_server_states(self) -> list[DataServerState]:
        """Each data server's status as this JobManager's monitor last saw it (UNKNOWN when it does not
        watch them: a standby, or before it leads); [] when channels live on the control Redis."""
        if self.data_monitor is not None:
            return self.data_monitor.states()
        return [DataServerState(i, data_servers.address(u)) for i, u in enumerate(self.config.data_redis_urls)]

    def _restart_hold(self, job_graph: JobGraph, attempt: int) -> str | None:
        """Why the job's next attempt should not deploy yet: it would put channels on a data server
        that is down, and its tasks would fail at their first write."""
        down = self.data_monitor.down() if self.data_monitor is not None else set()
        if not down:
            return None
        hit = sorted(down & data_servers.servers_of_attempt(job_graph, attempt, len(self.config.data_redis_urls)))
        if not hit:
            return None
        names = ", ".join(f"{i} ({data_servers.address(self.config.data_redis_urls[i])})" for i in hit)
        return f"data server {names} is down and the next attempt has channels on it"

    def _publish_data_servers(self) -> None:
        """Say which data servers channels go to: a slot refuses a task when its own list differs."""
        fingerprint = data_servers.fingerprint(self.config.data_redis_urls)
        self.writes.set(redis_keys.DATA_SERVERS, data_servers.seal_fingerprint(self.config.cluster_secret, fingerprint))

    def _check_redis_epoch(self) -> None:
        """Fail running jobs over when Redis is a new server: their channels, control messages and
        in-flight task reports are gone with the old one. Checkpoints live on disk, so each job
        restarts from its latest (its restart strategy permitting)."""
        run_id = _run_id(self.client)
        if self.redis_run_id is None or run_id == self.redis_run_id:
            self.redis_run_id = run_id
            return
        self.redis_run_id = run_id
        self._publish_data_servers()  # the new server lost it with everything else
        self.redis_failovers += 1
        if self.epoch is not None:  # the new server lost it: TaskManagers seal slot_lost reports with it
            messages.publish_epoch(self.writes, self.config.cluster_secret, self.epoch)
        reason = "Redis restarted (a new server, run_id changed): the job's channels and messages were lost"
        log.warning("%s; failing over every running job", reason)
        for jid, jm in list(self.jobs.items()):
            if jm.status.is_terminal():
                continue
            jm.on_redis_lost(reason, self.pool)  # streaming: fail over to a checkpoint; Spark: fail

    def _fail_interrupted_savepoints(self, jid: str) -> None:
        now = int(self.clock() * 1000)
        for sp in self.store.list_savepoints(jid):
            if sp.status == "IN_PROGRESS":
                sp.status, sp.completion_timestamp = "FAILED", now
                sp.failure_cause = "the JobManager restarted while the savepoint was in progress"
                self.store.save_savepoint(sp)

    def _history(self, jid: str) -> CheckpointStatsTracker:
        """Checkpoint statistics from SQL; checkpoints in flight when the old JobManager died count as failed."""
        return CheckpointStatsTracker.from_records(
            self.store.list_checkpoints(jid), self.store.list_checkpoint_restores(jid),
            history_size=self.config.checkpoints_history, now_ms=int(self.clock() * 1000),
        )

    def _gather_task_offers(self) -> TaskOffers:
        """Ask every slot of every registered TaskManager what it runs, and wait (bounded) for all to
        answer: a slot of a TaskManager that died but is still registered never does, and then only
        the jobs with a task there miss the adoption."""
        slots = {(tm.id, i) for tm in self.pool.taskmanagers.values() for i in range(tm.slots)}
        if not slots:
            return TaskOffers()
        request = uuid.uuid4().hex
        began = time.monotonic()
        for tm, slot in sorted(slots):
            self.gateway.request_task_report(tm, slot, request)
        deadline = began + self.config.task_offer_timeout_ms / 1000
        while True:
            answers = self.gateway.task_offers(request)
            if slots <= answers.keys() or time.monotonic() >= deadline or self._stop.is_set():
                break
            self._stop.wait(0.02)
        missing = sorted(slots - answers.keys())
        log.info(
            "%d of %d slots said what they run in %.0f ms%s", len(slots) - len(missing), len(slots),
            (time.monotonic() - began) * 1000, f"; no answer from {missing}" if missing else "",
        )
        return TaskOffers.parse(answers)

    def _adopt(self, rec: JobRecord, offers: TaskOffers) -> bool:
        """Take the job over as it runs, if every task of its current attempt still does."""
        full = self.store.get_job(rec.jid)
        jm = self._rebuild(full) if full is not None else None
        if full is None or jm is None:
            return False
        attempt = max((st.get("attempt", 0) for v in full.vertices for st in v.get("subtasks", ())), default=0)
        decision = reconcile(jm.job_graph, attempt, offers, self.pool.taskmanagers)
        why = decision if isinstance(decision, str) else jm.adopt(decision, rec, self.pool)
        if why is not None:
            log.info("job %s is not adopted (%s): it restarts from its latest checkpoint", rec.jid, why)
            return False
        self.jobs[rec.jid] = jm
        jm.persist()
        return True

    def _rebuild(self, full: JobRecord) -> JobMaster | None:
        """A job master for a job read back from SQL, its checkpoint history with it."""
        if not full.user_code:
            return None
        try:
            jm = JobMaster(
                JobGraph.from_dict(full.job_graph), full.user_code, self.gateway, self.store, self.clock,
                self.read_metrics, self.config.checkpoint_dir, self.config.savepoint_dir, self._history(full.jid),
                slot_request_timeout_ms=self.config.slot_request_timeout_ms,
            )
            jm.restart_hold = self._restart_hold
            return jm
        except Exception:
            log.exception("cannot rebuild job %s", full.jid)
            return None

    def _resume(self, rec: JobRecord) -> bool:
        full = self.store.get_job(rec.jid)
        jm = self._rebuild(full) if full is not None else None
        if full is None or jm is None:
            return False
        # Attempts after the ones the old TaskManager tasks ran, so no stale channel is ever read. SQL
        # has each attempt before its tasks are deployed (persist() on every restart): the metrics in
        # Redis alone could be deleted, and an attempt number used again would let an old attempt's
        # sealed buffers and reports be replayed into the new one.
        seen = [s.get("attempt", 0) for s in self._all_metric_samples(rec.jid)]
        seen += [st.get("attempt", 0) for v in full.vertices for st in v.get("subtasks", ())]
        if not jm.resume_from_latest_checkpoint(max(seen, default=0) + 1, rec.start_time):
            if self.leadership is None:
                return False  # a lone JobManager restarted: recorded as failed, as before
            # HA: the job was handed over, not abandoned; start it over (nothing was committed yet).
            jm.resume_from_scratch(max(seen, default=0) + 1, rec.start_time)
        self.gateway.release_job(rec.jid)
        self.jobs[rec.jid] = jm
        jm.persist()
        log.info("job %s resumes after a JobManager restart", rec.jid)
        return True

    def _all_metric_samples(self, job_id: str) -> list[dict[str, Any]]:
        key = redis_keys.task_metrics(job_id)
        samples = (
            messages.open_report(v, self.config.cluster_secret, "metrics", key, f.decode())
            for f, v in self.client.hgetall(key).items()
        )
        return [s for s in samples if s is not None]  # a forged sample must not pick the next attempt

    def _leading(self) -> bool:
        return self.leadership is None or self.leadership()

    def _step_down(self, reason: str) -> None:
        """Leave the job masters to the next leader: their tasks keep running until it redeploys them."""
        if not self.stepped_down:
            log.warning("the Dispatcher stops: %s; %d job(s) left to the next leader", reason, len(self.jobs))
        self.stepped_down = True
        self._stop.set()

    def _loop(self) -> None:
        next_membership = 0.0
        while not self._stop.is_set():
            if not self._leading():
                self._step_down("this JobManager no longer holds the leader lease")
                break
            try:
                # Begun only while the lease holds; it ends (0.2 s) within the lease's safety margin, so
                # a paused leader cannot take a report meant for its successor.
                got = self.client.blpop([redis_keys.JOBMANAGER_INBOX], timeout=0.2)
                batch = [got[1]] if got else []
                if got:
                    more = self.client.lpop(redis_keys.JOBMANAGER_INBOX, 500)
                    batch.extend(more or [])
                with self.lock:
                    if not self._leading():  # checked again after the wait: a pause may have ended the lease
                        self._step_down("this JobManager no longer holds the leader lease")
                        break
                    now = time.monotonic()
                    due = now >= next_membership
                    if due:  # before the batch: reports popped from a new Redis must not restart a job first
                        self._check_redis_epoch()
                    for raw in batch:
                        try:
                            msg = messages.open_message(
                                raw, self.config.cluster_secret, redis_keys.JOBMANAGER_INBOX, self._replay
                            )
                        except messages.Unauthenticated:
                            continue  # forged, or replayed here or from elsewhere: dropped (logged and counted)
                        self._handle(msg)
                    if due:
                        next_membership = now + self.config.heartbeat_interval_ms / 1000
                        self._refresh_membership()
                    for jm in list(self.jobs.values()):
                        jm.tick(self.pool)
                    self.store.flush()  # what SQL missed while it was away, once it is back
                    self._keep_ended_outputs()
                    self._archive_ended()
            except FencedOut as e:
                self._step_down(str(e))
                break
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as e:
                log.warning("Redis unavailable: %s", e)
                next_membership = 0.0  # the first round after it is back checks whether it restarted
                self._stop.wait(0.5)
            except Exception:
                log.exception("control loop error")

    def _keep_ended_outputs(self) -> None:
        """Put the print() output of each job that ended into the JobStore, once: every line it printed
        is in Redis by then (tasks and Spark partitions flush before they report themselves ended)."""
        now = time.monotonic()
        for jid, jm in list(self.jobs.items()):
            if jm.status.is_terminal() and jid not in self._outputs_kept and self._output_retry.get(jid, 0.0) <= now:
                if not self._keep_output(jid):
                    self._output_retry[jid] = now + 5.0  # not every round: each try logs

    def _keep_output(self, jid: str) -> bool:
        try:
            keep_output(self.client, self.store, jid, self.config.cluster_secret, int(self.clock() * 1000))
        except FencedOut:
            raise
        except Exception as e:  # Redis or SQL away: tried again next round; the rest of the loop goes on
            log.warning("the print() output of job %s is not kept yet: %s", jid, e)
            return False
        self._outputs_kept.add(jid)
        self._output_retry.pop(jid, None)
        return True

    def kept_output(self, jid: str) -> JobOutputRecord | None:
        """The print() output kept with an ended job, if it printed any."""
        return self.store.get_output(jid)

    def _archive_ended(self) -> None:
        """Drop jobs that ended ``archive_after_ms`` ago and whose history SQL has taken (a flush that
        failed is retried by their tick first); reads of them go to the JobStore from now on."""
        if self.store.pending():
            return  # SQL is away: an ended job stays readable here until its history is stored
        now = int(self.clock() * 1000)
        for jid, jm in list(self.jobs.items()):
            if not jm.status.is_terminal():
                continue
            ended = jm.eg.timestamps.get(jm.status.value, now)
            if now - ended < self.config.archive_after_ms:
                continue
            if isinstance(jm, JobMaster) and not jm.checkpointing.save_history():
                continue
            if jid not in self._outputs_kept and not self._keep_output(jid):
                continue  # tried again until Redis answers
            try:
                jm.persist()  # the final record, last metrics included
            except Exception:
                log.warning("job %s stays in memory: its record could not be stored", jid, exc_info=True)
                continue
            del self.jobs[jid]
            self._metric_samples.pop(jid, None)
            self._outputs_kept.discard(jid)
            self._output_retry.pop(jid, None)
            log.info("job %s (%s) left memory for the JobStore", jid, jm.status.value)

    def _handle(self, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        if kind == "task_state":
            if msg.get("state") == "FAILED" and self.data_monitor is not None:
                self.data_monitor.check_soon()  # a dead data server fails tasks first: know it before the restart
            jm = self.jobs.get(msg["job"])
            if jm is not None:
                jm.on_task_state(msg, self.pool)
        elif kind in ("checkpoint_ack", "checkpoint_decline"):
            jm = self.jobs.get(msg["job"])
            if isinstance(jm, JobMaster):
                jm.on_checkpoint_message(msg)
        elif kind == "slot_lost":
            for jm in list(self.jobs.values()):
                jm.on_slot_lost(msg["tm"], msg["slot"], msg["reason"], self.pool)
        self._schedule_waiting()

    def _note_joined(self, joined: list[str]) -> None:
        """Log each new TaskManager, and warn when it sees another default checkpoint directory than
        ours: state it writes there could not be found when restoring (a directory not shared)."""
        for tm in joined:
            info = self.pool.taskmanagers.get(tm)
            if info is None:
                continue
            log.info("TaskManager %s on %s registered with %d slots", tm, info.host, info.slots)
            theirs = info.details.get("checkpoint_dir")
            ours = storage_fs(self.config.checkpoint_dir).absolute(self.config.checkpoint_dir)
            if theirs and storage_fs(theirs).absolute(theirs) != ours:
                log.warning(
                    "TaskManager %s on %s uses checkpoint directory %s, but the JobManager uses %s: "
                    "MILLSTREAM_CHECKPOINT_DIR must be one directory shared by the JobManager and every "
                    "TaskManager, at the same path",
                    tm, info.host, theirs, ours,
                )

    def _refresh_membership(self) -> None:
        membership = self.rm.refresh()
        self._note_joined(membership.joined)
        for tm in membership.lost:
            reason = (
                f"TaskManager {tm} is no longer reachable: "
                f"no heartbeat for {self.config.heartbeat_timeout_ms} ms"
            )
            log.warning(reason)
            self.pool.remove(tm)
            for jm in list(self.jobs.values()):
                jm.on_taskmanager_lost(tm, reason, self.pool)
        self._schedule_waiting()

    def _schedule_waiting(self) -> None:
        waiting = [jm for jm in self.jobs.values() if jm.status is JobStatus.CREATED]
        blocked = False
        for jm in sorted(waiting, key=lambda j: j.eg.timestamps.get("CREATED", 0)):
            if isinstance(jm, SparkJobMaster):
                jm.try_schedule(self.pool)  # Spark jobs take no slots, so nothing holds them back
            elif not blocked and not jm.try_schedule(self.pool):
                blocked = True  # first come, first served: later slot-hungry jobs wait behind it

    # -- commands ------------------------------------------------------------------
    def submit(
        self,
        job_graph: JobGraph,
        user_code: bytes,
        savepoint_path: str | None = None,
        allow_non_restored_state: bool | None = None,
    ) -> str:
        """Accept a job; with ``savepoint_path`` (or Flink's ``execution.savepoint.path`` in the job's
        config) it starts from that savepoint. A missing or corrupt savepoint, or state no operator
        takes (unless ``allow_non_restored_state``), refuses the job and starts nothing."""
        self._validate(job_graph)
        self.confine_job_paths(job_graph.config, savepoint_path)  # before any path is opened
        job_graph = _with_savepoint_options(job_graph, savepoint_path, allow_non_restored_state)
        if self.config.latency_interval_ms > 0 and LATENCY_INTERVAL_KEY not in job_graph.config:
            # The cluster's latency-marker interval, unless the job chose its own (0 turns it off).
            config = {**job_graph.config, LATENCY_INTERVAL_KEY: self.config.latency_interval_ms}
            job_graph = dataclasses.replace(job_graph, config=config)
        with self.lock:
            # A Redis that came back as a new server is noticed before the job starts on it: noticed
            # later, the failover meant for the jobs that lost their channels would fail this one too.
            self._check_redis_epoch()
            if job_graph.job_id in self.jobs or self.store.get_job(job_graph.job_id):
                raise DuplicateJobSubmission(f"job {job_graph.job_id} was already submitted")
            limit = self.config.max_concurrent_jobs
            if limit is not None and sum(not jm.status.is_terminal() for jm in self.jobs.values()) >= limit:
                raise TooManyJobs(f"the cluster already runs {limit} jobs, its limit (max_concurrent_jobs)")
            jm = self._job_master_for(job_graph, user_code)
            path = job_graph.config.get(SAVEPOINT_PATH_KEY)
            if path:
                if not isinstance(jm, JobMaster):
                    raise JobSubmissionError("a BATCH job on Spark cannot start from a savepoint; use --engine native")
                try:
                    jm.restore_from_savepoint(str(path), jm.allow_non_restored_state)
                except InvalidSavepoint as e:
                    raise JobSubmissionError(f"invalid savepoint: {e}") from e
                except StateRestoreError as e:
                    raise JobSubmissionError(str(e)) from e
            self.jobs[job_graph.job_id] = jm
            log.info(
                "job %s (%s) submitted: %s, %d vertices, parallelism up to %d", job_graph.job_id, job_graph.name,
                job_graph.job_type, len(job_graph.vertices), max((v.parallelism for v in job_graph.vertices), default=0),
            )
            jm.persist()
            self._note_joined(self.rm.refresh().joined)
            self._schedule_waiting()
        return job_graph.job_id

    def _job_master_for(self, job_graph: JobGraph, user_code: bytes) -> "JobMaster | SparkJobMaster":
        engine = str(job_graph.config.get("execution.batch-engine", self.config.batch_engine))
        if engine not in ("spark", "native"):
            raise JobSubmissionError(f"unknown batch engine '{engine}'; choose spark or native")
        if job_graph.job_type == "BATCH" and engine == "spark":
            missing = spark_unavailable_reason()
            if missing is not None:  # refused here, rather than an ImportError in the driver process later
                raise JobSubmissionError(
                    f"this BATCH job runs on Spark, but {missing}; or run it with --engine native "
                    "(the streaming runtime in batch mode)"
                )
            try:
                return SparkJobMaster(
                    job_graph,
                    user_code,
                    self.gateway,
                    self.store,
                    self.clock,
                    self.read_metrics,
                    spark_master=self.config.spark_master,
                    redis_url=self.config.redis_url,
                    spark_conf=dict(self.config.spark_conf),
                )
            except UntranslatableJob as e:
                raise JobSubmissionError(f"{e}; run it with --engine native to use the streaming runtime") from e
        jm = JobMaster(
            job_graph, user_code, self.gateway, self.store, self.clock, self.read_metrics, self.config.checkpoint_dir,
            self.config.savepoint_dir, checkpoint_stats=CheckpointStatsTracker(self.config.checkpoints_history),
            slot_request_timeout_ms=self.config.slot_request_timeout_ms,
        )
        jm.restart_hold = self._restart_hold
        return jm

    def spark_progress(self, record: JobRecord) -> dict[str, Any] | None:
        """Spark's progress of a BATCH job on Spark: live while its job master is held here, else
        what the job's record kept when it ended (None for other jobs)."""
        with self.lock:
            jm = self.jobs.get(record.jid)
        return jm.spark_progress() if isinstance(jm, SparkJobMaster) else record.spark

    def _validate(self, g: JobGraph) -> None:
        if len(g.job_id) != 32 or any(c not in "0123456789abcdef" for c in g.job_id):
            raise JobSubmissionError("job id must be 32 lowercase hex characters")
        if not g.vertices:
            raise JobSubmissionError("the job has no operators")
        for v in g.vertices:
            if v.parallelism < 1:
                raise JobSubmissionError(f"parallelism of '{v.name}' must be at least 1, got {v.parallelism}")
            if v.parallelism > v.max_parallelism:
                raise JobSubmissionError(
                    f"parallelism {v.parallelism} of '{v.name}' exceeds its max parallelism {v.max_parallelism}"
                )
            if v.parallelism > self.config.max_parallelism:
                raise JobSubmissionError(
                    f"parallelism {v.parallelism} of '{v.name}' exceeds the cluster limit {self.config.max_parallelism} (max_parallelism)"
                )

    def cancel(self, job_id: str) -> bool:
        with self.lock:
            jm = self.jobs.get(job_id)
            if jm is None:
                if self.store.get_job(job_id) is None:
                    raise UnknownJob(job_id)
                return False
            return jm.cancel(self.pool)

    # -- queries -------------------------------------------------------------------
    def job_master(self, job_id: str) -> JobMaster | None:
        return self.jobs.get(job_id)

    def live_job_ids(self) -> list[str]:
        """The jobs this JobManager holds in memory (running, or ended and not yet archived)."""
        with self.lock:
            return list(self.jobs)

    def job_record(self, job_id: str) -> JobRecord | None:
        """A live job's current record, or a finished job's stored one."""
        with self.lock:
            jm = self.jobs.get(job_id)
            if jm is not None:
                return jm.record(self.read_metrics(job_id, jm.eg.attempt) if not jm.status.is_terminal() else None)
        return self.store.get_job(job_id)

    def job_records(self, unfinished_only: bool = False) -> list[JobRecord]:
        """Every job, newest first (or only those in no terminal state: what a periodic reader
        wants, without loading the whole stored history each time)."""
        with self.lock:
            live = {jid: jm.record(jm.final_metrics) for jid, jm in self.jobs.items()}
        if unfinished_only:
            live = {jid: r for jid, r in live.items() if r.state not in TERMINAL_STATES}
        stored = [r for r in self.store.list_jobs(unfinished_only=unfinished_only) if r.jid not in live]
        return sorted([*live.values(), *stored], key=lambda r: r.start_time, reverse=True)

    def status_message(self, job_id: str) -> str | None:
        """Why a live job is not running yet (e.g. waiting for slots), if it says."""
        with self.lock:
            jm = self.jobs.get(job_id)
            return jm.eg.status_message if jm is not None else None

    def exceptions(self, job_id: str, limit: int) -> list[ExceptionRecord]:
        return self.store.list_exceptions(job_id, limit=limit)

    def slot_pool_snapshot(self) -> SlotPool:
        """A copy of the TaskManagers and slot allocations, safe to read without the lock."""
        with self.lock:
            return copy.deepcopy(self.pool)

    def taskmanager_metrics(self, tm_id: str) -> dict[str, Any]:
        return self.rm.taskmanager_metrics(tm_id)

    def checkpointing(self, job_id: str) -> "JobCheckpointing | None":
        """The job's checkpoint statistics and config: live while this JobManager runs the job, else
        rebuilt from SQL. None when checkpointing is off and the job has no savepoint either."""
        with self.lock:
            jm = self.jobs.get(job_id)
            if isinstance(jm, JobMaster):
                cp = jm.checkpointing
                return cp if cp.enabled or cp.has_history else None
            if jm is not None:
                return None  # a Spark job
        records = self.store.list_checkpoints(job_id)
        restores = self.store.list_checkpoint_restores(job_id)
        if not records and not restores:
            return None
        record = self.store.get_job(job_id)
        if record is None:
            return None
        stats = CheckpointStatsTracker.from_records(records, restores, history_size=self.config.checkpoints_history)
        return JobCheckpointing.archived(JobGraph.from_dict(record.job_graph), stats, self.config.checkpoint_dir)

    def read_metrics(self, job_id: str, attempt: int) -> dict[tuple[str, int], dict[str, Any]]:
        """Live task metrics; none while Redis is away, so reads of a job still answer from what
        the JobManager and SQL know."""
        try:
            raw = self.client.hgetall(redis_keys.task_metrics(job_id))
        except redis.RedisError as e:
            log.warning("no live metrics of job %s: %s", job_id, e)
            return {}
        out: dict[tuple[str, int], dict[str, Any]] = {}
        newest = self._metric_samples.setdefault(job_id, {})
        for field, value in raw.items():
            vid, _, sub = field.decode().rpartition(":")
            sample = messages.open_report(
                value, self.config.cluster_secret, "metrics", redis_keys.task_metrics(job_id), field.decode()
            )
            if sample is None or sample.get("attempt") != attempt:
                continue
            # One writer per subtask and attempt stamps its samples (sealed) with its time, as
            # heartbeats: an older one put back into the field is a copy, and the newest seen stands.
            known = newest.get(field)
            if known is not None and known.get("attempt") == attempt and _stamp(sample) < _stamp(known):
                sample = known
            else:
                newest[field] = sample
            out[(vid, int(sub))] = sample
        return out

    def stdout_positions(self, job_id: str) -> ElementPositions:
        """The job's print-stream positions, which leave copied lines out (engine/runtime/io/job_stdout.py).
        Kept for the 32 jobs read most recently: a stream is readable for an hour after its job left
        memory, and a client finishing its read then must not see copies either. New ones ask the
        JobStore (SQL) what was read of each writer they meet, so neither a restart nor a Redis writer
        resetting the stream makes them forget it."""
        with self.lock:
            positions = self._stdout_positions.pop(job_id, None)
            if positions is None:
                positions = ElementPositions(durable=StoredStdoutMarks(self.store, job_id))
            self._stdout_positions[job_id] = positions
            while len(self._stdout_positions) > 32:
                self._stdout_positions.popitem(last=False)
            return positions

    def collect_positions(self, job_id: str) -> CollectPositions:
        """The job's result-list positions, which leave copied entries out (engine/runtime/io/redis_collect.py).
        Kept for the 32 jobs read most recently, whether in memory or not: results stay readable for an
        hour after their job ended, and positions made afresh on each call would know no copy. New ones
        (after a restart, or once dropped here) first take in the marks sealed into the job's collect hash,
        and ask the JobStore (SQL) for the highest index read of each writer they meet: a Redis restart or
        a deleted hash cannot make them forget an entry read before."""
        with self.lock:
            positions = self._collect_positions.pop(job_id, None)
            if positions is None:
                positions = CollectPositions(StoredCollectMarks(self.store, job_id))
            self._collect_positions[job_id] = positions
            while len(self._collect_positions) > 32:
                self._collect_positions.popitem(last=False)
            return positions

    def collect(self, job_id: str, offset: int, ack: Ack | None = None) -> tuple[list[bytes], bool, int]:
        """execute_and_collect's result entries from ``offset``, acknowledging (dropping) those before
        it; whether the job has ended; and the offset to ask from next (copies left out count). ``ack``:
        the record positions the client holds, which its collect sink may forget. Raises
        ResultOffsetError for an offset already acknowledged or past the entries written."""
        with self.lock:
            jm = self.jobs.get(job_id)
            if jm is None and self.store.get_job(job_id) is None:
                raise UnknownJob(job_id)
            if jm is not None and offset > 0:
                self._check_redis_epoch()  # a client may ask before the control loop saw Redis restart
            ended = jm is None or jm.status.is_terminal()
            positions = self.collect_positions(job_id)
        if ack is not None and not ended:
            record_ack(self.client, job_id, ack, self.config.cluster_secret)
        # A results list lost with a Redis restart is recognised in Redis itself (see _FETCH), so
        # this holds across a JobManager restart too.
        batch = fetch_batch(
            self.client, job_id, offset, secret=self.config.cluster_secret, ended=ended, positions=positions
        )
        if ended:
            expire_results(self.client, job_id)
        return batch.entries, ended, batch.next_offset

    def overview(self) -> dict[str, int]:
        with self.lock:
            counts = {s: 0 for s in ("running", "finished", "cancelled", "failed")}
            # The live jobs' states from memory, the others counted by SQL, not loaded one by one.
            states = Counter(jm.status.value for jm in self.jobs.values())
            states.update(self.store.count_jobs(excluding=list(self.jobs)))
            for state, n in states.items():
                st = JobStatus(state)
                if st is JobStatus.FINISHED:
                    counts["finished"] += n
                elif st is JobStatus.CANCELED:
                    counts["cancelled"] += n
                elif st is JobStatus.FAILED:
                    counts["failed"] += n
                else:
                    counts["running"] += n
            return {
                "taskmanagers": len(self.pool.taskmanagers),
                "slots-total": self.pool.total_slots(),
                "slots-available": self.pool.available_slots(),
                **{f"jobs-{k}": v for k, v in counts.items()},
            }


def _with_savepoint_options(
    job_graph: JobGraph, savepoint_path: str | None, allow_non_restored_state: bool | None
) -> JobGraph:
    """The savepoint options go into the job's config, as Flink's CLI does, so a JobManager that
    restarts before the first checkpoint still knows where the job started from."""
    config = dict(job_graph.config)
    if savepoint_path:
        config[SAVEPOINT_PATH_KEY] = savepoint_path
    if allow_non_restored_state is not None:
        config[ALLOW_NON_RESTORED_KEY] = bool(allow_non_restored_state)
    if config.get(SAVEPOINT_PATH_KEY):
        path = str(config[SAVEPOINT_PATH_KEY])
        config[SAVEPOINT_PATH_KEY] = storage_fs(path).absolute(path)  # a local path made absolute, a URL kept
    if config == job_graph.config:
        return job_graph
    return dataclasses.replace(job_graph, config=config)


def _stamp(sample: dict[str, Any]) -> int:
    ts = sample.get("ts")
    return ts if isinstance(ts, int) else -1


def _run_id(client: redis.Redis) -> str:
    """The Redis server's run id: a new one each time the server starts."""
    return str(client.info("server").get("run_id", ""))
