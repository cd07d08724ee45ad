"""One slot of a TaskManager: a child process that runs the subtasks deployed to it.

A slot is a process, not a thread, so a TaskManager with N slots can keep N
cores busy despite the interpreter lock. Subtasks sharing the slot (one per
vertex, by slot sharing) run as threads inside it. The process dies with its
TaskManager (PR_SET_PDEATHSIG, and a check of its parent after asking for that, for a TaskManager
that died while the slot started), so a SIGKILLed TaskManager leaves no orphans.
"""
from __future__ import annotations

import ctypes
import dataclasses
import gc
import logging
import os
import queue
import signal
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import redis

from millstream.engine import redis_keys
from millstream.engine.checkpoint.storage import seal_state_files
from millstream.engine.compat.pyflink_alias import install as install_pyflink_alias
from millstream.engine.metrics.groups import OPERATOR_NAME_MAX_LENGTH
from millstream.engine.metrics.task_report import TaskMetricsReport, encode_reports
from millstream.engine.runtime.checkpointing import Barrier
from millstream.engine.runtime.deployment import TaskDeploymentDescriptor
from millstream.engine.runtime.collect import gated_by_checkpoints
from millstream.engine.runtime.io import data_servers
from millstream.engine.runtime.io.channel import TaskCancelled
from millstream.engine.runtime.io.redis_collect import RedisCollectGateway
from millstream.engine.runtime.io.redis_channels import RedisChannelFactory
from millstream.engine.runtime.io.serialization import MsgpackSerializer
from millstream.engine.runtime.python_dependencies import activate, materialize
from millstream.engine.runtime import process_logging
from millstream.engine.taskexecutor.log_shipper import ship_logs
from millstream.engine.taskexecutor.stack_sampler import sample_threads
from millstream.engine.runtime.user_code_class_loader import load_user_code
from millstream.engine.runtime.stream_task import StreamTask, TaskEnvironment
from millstream.engine.runtime.io.job_stdout import StdoutForwarder
from millstream.engine.security.mac import Unauthenticated, check_secret, unseal_for_benchmark
from millstream.engine.security.replay import ReplayWindow
from millstream.engine.taskexecutor import code_signing, messages
from millstream.engine.taskexecutor.free_memory import release_free_memory
from millstream.engine.taskexecutor.task_stdout import TaskStdout

log = logging.getLogger("millstream.slot")

METRICS_INTERVAL_S = 1.0
METRICS_TTL_S = 24 * 3600
MAX_STACK_SAMPLES = 1000  # per subtask and request, whatever a request asks
MAX_ENDED_TASKS = 256  # final states a slot keeps for task offers (a slot runs one job's tasks at a time)
#: The interpreter's switch interval in a slot (CPython's default is 5 ms). The subtasks of a slot are
#: threads, and a thread with a deadline (a source flushing its buffers when the buffer timeout passes,
#: a task whose blocking read just returned) waits for the lock as long as another one computes: up to
#: 5 ms per hand-over, which was most of the latency markers' tail at a 10 ms buffer timeout (p99
#: 25-26 ms against 15 ms with 1 ms, at 100,000 records/s; no throughput loss told apart from the
#: noise; docs/performance.md, "Latency").
SWITCH_INTERVAL_S = 0.001
#: The cyclic collector's thresholds in a slot (CPython's default is 700, 10, 10). A full collection
#: walks every entry of every tracked container, so keyed state in dicts costs it O(state) however few
#: objects it counts, and CPython's rule for a full one (the survivors since the last grew by a
#: quarter) is met almost every time, since start-up's objects are frozen. A plain dict is untracked by
#: a full collection and tracked again by the next value stored in it, then walked by the young
#: collections too. With the defaults a 1.5 M-key heap count spent 20-35 % of its time collecting
#: and a collection landing in a barrier paused the task 50-165 ms (docs/large-state.md, change 10).
#: Here a full collection comes after about 10 M net new objects (young ones every 10,000), so
#: per-record garbage still dies young and a job's end still collects everything (_release_if_idle).
GC_THRESHOLDS = (10_000, 10, 100)
#: how long a task's final report waits for Redis to come back before it is given up
REPORT_RETRY_S = 300.0
#: where the slot process started: the working directory of jobs that ship no archives
_STARTING_DIRECTORY = os.getcwd()


@dataclass(frozen=True)
class SlotConfig:
    tm_id: str
    slot: int
    redis_url: str
    credits: int = 8
    buffer_records: int = 1024
    state_dir: str | None = None
    cluster_secret: str | None = None  # user code not signed with it is refused
    unsealed_benchmark: bool = False  # benchmark only: nothing is sealed (engine/security/mac.py)
    data_redis_urls: tuple[str, ...] = ()  # data servers channels are sharded over; empty: redis_url
    parent_pid: int | None = None  # the TaskManager's: a slot that starts after it died exits (``_die_with_parent``)


#: exit code of a slot process that found its TaskManager gone as it started
ORPHANED_EXIT_CODE = 75


def _die_with_parent(parent_pid: int | None) -> None:
    """Be SIGKILLed when the TaskManager dies. The request covers only deaths after it is made: a
    TaskManager SIGKILLed while its slot was still starting (the interpreter's start-up and imports,
    up to a second) left the slot running under init, forever. So the parent is checked after it."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass  # not Linux: the TaskManager's own shutdown still terminates us
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(ORPHANED_EXIT_CODE)  # nothing of ours is running yet: nothing to clean up


def _operator_ids(tdd: TaskDeploymentDescriptor, task: StreamTask) -> tuple[tuple[str, str], ...]:
    """The chain's (operator name, operator id) pairs, the name cut as metric groups cut it
    (OPERATOR_NAME_MAX_LENGTH), so the TaskManager's reporter can find an operator metric's id."""
    graph = task.graph
    return tuple(
        (graph.transformations[n].name[:OPERATOR_NAME_MAX_LENGTH], graph.nodes[n].operator_id)
        for n in tdd.operators if n in graph.nodes and n in graph.transformations
    )


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Running:
    task: StreamTask
    thread: threading.Thread
    tdd: TaskDeploymentDescriptor
    state: str = "INITIALIZING"  # as last reported to the JobManager; what a task offer says


class SlotExecutor:
    def __init__(
        self, cfg: SlotConfig, client: redis.Redis, stdout: TaskStdout | None = None, metrics_pipe: Connection | None = None
    ) -> None:
        check_secret(cfg.cluster_secret)  # no secret: no data plane at all rather than an unauthenticated one
        self.cfg = cfg
        self.client = client
        # Channels go to the data servers when there are any (engine/runtime/io/data_servers.py), else here.
        self.data_clients = [
            redis.Redis.from_url(u, socket_keepalive=True, health_check_interval=30) for u in cfg.data_redis_urls
        ] or [client]
        # print() lines go to this process's stdout and to their job's print stream in Redis
        self.stdout = stdout or TaskStdout(sys.stdout, StdoutForwarder(client, secret=cfg.cluster_secret))
        self.inbox = redis_keys.slot_inbox(cfg.tm_id, cfg.slot)
        self.replay = ReplayWindow(self.inbox)  # a deploy or cancel pushed again acts once
        # The epoch of the newest JobManager that wrote to this slot: what its reports are sealed for
        # (a JobManager that restarted refuses reports sealed for its earlier epoch, copies included).
        self.jobmanager_epoch: int | None = None
        self.tasks: dict[tuple[str, str, int, int], _Running] = {}
        # Tasks that ended here, with their final state, oldest first: a final report sent while no
        # JobManager led is sealed for the dead one's epoch and refused by its successor, so each
        # task offer repeats them (as Flink's TaskExecutor reports its tasks to a new JobMaster).
        # Dropped when a JobManager cancels that job attempt or deploys a newer one here; bounded.
        self.ended: dict[tuple[str, str, int, int], str] = {}
        # (job, attempt) -> the highest checkpoint id its tasks here were triggered with or acknowledged:
        # a JobManager that adopts the running tasks continues its checkpoint ids after it.
        self.checkpoints_seen: dict[tuple[str, int], int] = {}
        self.lock = threading.Lock()
        self.code_cache: dict[str, bytes] = {}
        self._refused_fingerprint: bytes | None = None  # the last unsealed ms:data:servers value, logged once
        self.serializer = MsgpackSerializer()
        self.stopping = threading.Event()
        # To the TaskManager's Prometheus endpoint (engine/taskexecutor/metrics_server.py); None: it has none.
        # Written by one thread from a small queue: a pipe write blocks while the TaskManager is not
        # reading, and neither a task thread nor the Redis metrics loop may wait on it.
        self.metrics_pipe = metrics_pipe
        self._to_taskmanager: queue.Queue[bytes] = queue.Queue(maxsize=4)
        # The slot ran out of tasks: the ended job's memory is freed once the inbox stays quiet (serve).
        self.release_pending = False

    # -- messages --------------------------------------------------------------
    def report(self, tdd: TaskDeploymentDescriptor, state: str, error: str | None = None, exc_name: str | None = None) -> None:
        msg = messages.task_state(
            tdd.job_id, tdd.vertex_id, tdd.subtask, tdd.attempt, state, self.cfg.tm_id, self.cfg.slot, now_ms(), error, exc_name
        )
        self._send_reliably(msg)

    def _send_reliably(self, msg: dict[str, Any]) -> None:
        """Send a task state to the JobManager, waiting out a Redis outage with backoff: a task that
        failed because Redis went away must still say so once it is back, or its job would wait for it."""
        deadline = time.monotonic() + REPORT_RETRY_S
        delay = 0.05
        while True:
            try:
                self._send(msg)
                return
            except (redis.ConnectionError, redis.TimeoutError):
                if time.monotonic() > deadline or self.stopping.is_set():
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def handle(self, msg: dict[str, Any]) -> None:
        epoch = msg.get("epoch")
        if isinstance(epoch, int) and (self.jobmanager_epoch is None or epoch > self.jobmanager_epoch):
            self.jobmanager_epoch = epoch
        if msg["type"] == "deploy":
            self.deploy(TaskDeploymentDescriptor.from_dict(msg["tdd"]))
        elif msg["type"] == "report_tasks":
            self._offer_tasks(str(msg["request"]))
        elif msg["type"] == "trigger_checkpoint":
            self._checkpoint_seen(msg["job"], msg["attempt"], msg["barrier"][0])
            with self.lock:
                running = self.tasks.get((msg["job"], msg["vertex"], msg["subtask"], msg["attempt"]))
            if running is not None:
                running.task.trigger_checkpoint(Barrier.from_wire(msg["barrier"]))
            else:  # the task already ended: the checkpoint cannot complete without it
                self._send(
                    messages.checkpoint_decline(
                        msg["job"], msg["attempt"], msg["vertex"], msg["subtask"], msg["barrier"][0],
                        "the source subtask is no longer running",
                        not_ready=True,
                    )
                )
        elif msg["type"] == "notify_checkpoint_complete":
            with self.lock:
                targets = [r for k, r in self.tasks.items() if k[0] == msg["job"] and k[3] == msg["attempt"]]
            for r in targets:
                r.task.notify_checkpoint_complete(msg["checkpoint_id"])
        elif msg["type"] == "notify_checkpoint_aborted":
            with self.lock:
                targets = [r for k, r in self.tasks.items() if k[0] == msg["job"] and k[3] == msg["attempt"]]
            for r in targets:
                r.task.notify_checkpoint_aborted(msg["checkpoint_id"])
        elif msg["type"] == "request_stack_samples":
            self._sample_stacks(msg)
        elif msg["type"] == "cancel":
            self._forget_ended(msg["job"], msg["attempt"])  # the JobManager gave those attempts up
            with self.lock:
                victims = [r for k, r in self.tasks.items() if k[0] == msg["job"] and k[3] <= msg["attempt"]]
            for r in victims:
                r.task.cancel()

    def _checkpoint_seen(self, job: str, attempt: int, checkpoint_id: int) -> None:
        with self.lock:
            key = (job, attempt)
            if checkpoint_id > self.checkpoints_seen.get(key, 0):
                self.checkpoints_seen[key] = checkpoint_id

    def _forget_ended(self, job: str, up_to_attempt: int) -> None:
        with self.lock:
            for k in [k for k in self.ended if k[0] == job and k[3] <= up_to_attempt]:
                del self.ended[k]

    def _offer_tasks(self, request: str) -> None:
        """Answer a recovering JobManager with the tasks this slot runs, and those that ended here with
        their final state (sealed for the request's key and this slot's field): it adopts a job instead
        of redeploying it when all its attempt's tasks are running or finished."""
        with self.lock:
            tasks = [
                {"job": k[0], "vertex": k[1], "subtask": k[2], "attempt": k[3], "state": r.state}
                for k, r in self.tasks.items()
            ]
            tasks += [
                {"job": k[0], "vertex": k[1], "subtask": k[2], "attempt": k[3], "state": state}
                for k, state in self.ended.items() if k not in self.tasks
            ]
            seen = [[job, attempt, cid] for (job, attempt), cid in self.checkpoints_seen.items()]
        key, field = redis_keys.task_offers(request), f"{self.cfg.tm_id}:{self.cfg.slot}"
        offer = messages.task_offer(self.cfg.tm_id, self.cfg.slot, os.getpid(), tasks, seen)
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(key, field, messages.seal_report(offer, self.cfg.cluster_secret, "task_offer", key, field))
        pipe.expire(key, redis_keys.TASK_OFFERS_TTL_S)
        pipe.execute()

    def _sample_stacks(self, msg: dict[str, Any]) -> None:
        """Sample the vertex's task threads here on a thread of their own (the inbox keeps being read),
        and answer per subtask, sealed, into the request's key; a subtask no longer here answers empty."""
        n = min(max(int(msg["num_samples"]), 1), MAX_STACK_SAMPLES)
        delay_s = min(max(int(msg["delay_ms"]), 0), 1000) / 1000
        with self.lock:
            targets = [
                (k[2], r.thread.ident) for k, r in self.tasks.items()
                if k[0] == msg["job"] and k[1] == msg["vertex"] and k[3] == msg["attempt"]
            ]

        def run() -> None:
            key = redis_keys.stack_samples(str(msg["request"]))
            for subtask, ident in targets:
                samples = sample_threads([ident] if ident else [], n, delay_s, should_stop=self.stopping.is_set)
                field = f"{msg['vertex']}:{subtask}"
                value = messages.seal_report({"samples": samples}, self.cfg.cluster_secret, "stack_samples", key, field)
                try:
                    pipe = self.client.pipeline(transaction=False)
                    pipe.hset(key, field, value)
                    pipe.expire(key, redis_keys.STACK_SAMPLES_TTL_S)
                    pipe.execute()
                except (redis.RedisError, ValueError, TypeError):
                    log.warning("could not answer a stack sample request", exc_info=True)

        threading.Thread(target=run, name="stack-sampler", daemon=True).start()

    def _check_data_servers(self) -> None:
        """Refuse to run a task whose channels this slot would put on other servers than the JobManager's."""
        published = self.client.get(redis_keys.DATA_SERVERS)
        if published is None:
            return  # a JobManager from before the check, or one that has not published yet
        try:
            theirs = data_servers.open_fingerprint(self.cfg.cluster_secret, published)
        except Unauthenticated as e:
            # Not the JobManager's (written without the cluster secret): acting on it would let anyone
            # with Redis access fail every deploy. Ignored like an unpublished one; logged once per value.
            if published != self._refused_fingerprint:
                self._refused_fingerprint = published
                log.warning("ignoring the data servers' fingerprint in Redis (%r): %s", published[:100], e)
            return
        ours = data_servers.fingerprint(self.cfg.data_redis_urls)
        if theirs != ours:
            raise data_servers.DataServersMismatch(
                f"this TaskManager's MILLSTREAM_DATA_REDIS_URLS ({'fingerprint ' + ours if ours else 'unset'}) is not "
                f"the JobManager's ({'fingerprint ' + theirs if theirs else 'unset'}): every process needs the same "
                "data servers in the same order"
            )

    def deploy(self, tdd: TaskDeploymentDescriptor) -> None:
        key = (tdd.job_id, tdd.vertex_id, tdd.subtask, tdd.attempt)
        self._forget_ended(tdd.job_id, tdd.attempt - 1)  # a JobManager that deploys a newer attempt knows
        try:
            code = self.code_cache.get(tdd.job_id)
            if code is None:
                envelope = self.client.get(redis_keys.job_user_code(tdd.job_id))
                if envelope is None:
                    raise RuntimeError(f"user code of job {tdd.job_id} is missing from Redis")
                # Checked before it is ever unpickled: Redis is shared, the cluster secret is not.
                code = code_signing.verify(self.cfg.cluster_secret, tdd.job_id, envelope)
                self.code_cache[tdd.job_id] = code
            # Files the program shipped (add_python_file) go on the import path before its code loads.
            shipped = materialize(code, os.path.join(self.cfg.state_dir or tempfile.gettempdir(), "millstream-python-files"))
            activate(shipped.python_path)
            # A slot runs one job at a time (its tasks share it), so the process may take its working
            # directory: archives the job shipped are found by relative path, as in PyFlink's worker.
            # A job that shipped no archives works where the process started, not in the last job's.
            os.chdir(shipped.working_dir if shipped.working_dir is not None else _STARTING_DIRECTORY)
            self._check_data_servers()
            graph = load_user_code(shipped.graph)  # also registers the classes the program defined
            cancelled = threading.Event()
            env = TaskEnvironment(
                channels=RedisChannelFactory(self.data_clients, self.cfg.credits, cancelled, self.cfg.cluster_secret),
                cancelled=cancelled,
                print_line=lambda text, job=tdd.job_id: self.stdout.print_line(job, text),
                collect=self._collect_gateway(tdd, cancelled),
                state_dir=self.cfg.state_dir,
                checkpoint_ack=lambda cid, ack, t=tdd: self._send_checkpoint_message(
                    t, cid, messages.checkpoint_ack(t.job_id, t.attempt, t.vertex_id, t.subtask, cid, ack.to_dict())
                ),
                checkpoint_decline=lambda cid, reason, not_ready=False, t=tdd: self._send_checkpoint_message(
                    t, cid,
                    messages.checkpoint_decline(t.job_id, t.attempt, t.vertex_id, t.subtask, cid, reason, not_ready),
                ),
            )
            tdd_cfg = dict(tdd.config)
            tdd_cfg.setdefault("taskmanager.buffer-records", self.cfg.buffer_records)
            tdd = dataclasses.replace(tdd, config=tdd_cfg)
            task = StreamTask(tdd, graph, env)
        except Exception:
            self.report(tdd, "FAILED", traceback.format_exc(), sys.exc_info()[0].__name__)
            return
        thread = threading.Thread(target=self._run, args=(key, task, tdd), name=task.name, daemon=True)
        with self.lock:
            self.tasks[key] = _Running(task, thread, tdd)
        self.report(tdd, "INITIALIZING")
        thread.start()

    def _run(self, key: tuple[str, str, int, int], task: StreamTask, tdd: TaskDeploymentDescriptor) -> None:
        state, error, exc_name = "FINISHED", None, None
        self.stdout.bind(tdd.job_id)
        with process_logging.task_log_context(tdd.job_id, tdd.attempt):
            try:
                self.report(tdd, "RUNNING")
                with self.lock:
                    running = self.tasks.get(key)
                    if running is not None:
                        running.state = "RUNNING"
                task.run()
            except TaskCancelled:
                state = "CANCELED"
            except BaseException as e:  # a user function failed: the task fails, the slot lives on
                state, error, exc_name = "FAILED", traceback.format_exc(), type(e).__name__
                # As Flink's TaskManager log says it, with the whole trace.
                log.warning("%s switched from RUNNING to FAILED", task.name, exc_info=True)
        if state == "FINISHED" and task.env.cancelled.is_set():
            state = "CANCELED"
        try:
            self._publish_metrics([(tdd, task)], ended=True)
        except redis.RedisError:
            log.warning("could not publish the final metrics of %s", task.name, exc_info=True)
        self.stdout.unbind()
        self.stdout.forwarder.flush()  # a client draining the job's output once it ended sees every line
        with self.lock:
            self.tasks.pop(key, None)
            self.ended.pop(key, None)  # re-inserted: the newest last
            self.ended[key] = state
            while len(self.ended) > MAX_ENDED_TASKS:
                del self.ended[next(iter(self.ended))]
            if not any(k[0] == tdd.job_id for k in self.tasks):
                self.code_cache.pop(tdd.job_id, None)
            if not any(k[0] == tdd.job_id and k[3] == tdd.attempt for k in self.tasks):
                self.checkpoints_seen.pop((tdd.job_id, tdd.attempt), None)
            if not self.tasks:
                self.release_pending = True
        self.report(tdd, state, error, exc_name)

    def _send_checkpoint_message(self, tdd: TaskDeploymentDescriptor, checkpoint_id: int, msg: dict[str, Any]) -> None:
        self._checkpoint_seen(tdd.job_id, tdd.attempt, checkpoint_id)
        self._send(msg)

    def _send(self, msg: dict[str, Any]) -> None:
        inbox = redis_keys.JOBMANAGER_INBOX
        self.client.rpush(inbox, messages.seal(msg, self.cfg.cluster_secret, inbox, self.jobmanager_epoch))

    def _collect_gateway(self, tdd: TaskDeploymentDescriptor, cancelled: threading.Event) -> RedisCollectGateway:
        """Where a collect sink's results go: the job's Redis list, bounded by the client's reading."""
        return RedisCollectGateway(
            self.client, tdd.job_id, gated_by_checkpoints(tdd.config), cancelled, secret=self.cfg.cluster_secret
        )

    # -- metrics ---------------------------------------------------------------
    def _publish_metrics(self, tasks: list[tuple[TaskDeploymentDescriptor, StreamTask]], ended: bool = False) -> None:
        """One sample per task, to Redis for the JobManager and to this TaskManager's Prometheus endpoint
        (``ended``: the task's last, after which the endpoint drops it). Sampled once for both: a
        sample resets the per-second figures."""
        if not tasks:
            return
        pipe = self.client.pipeline(transaction=False)
        reports: list[TaskMetricsReport] = []
        for tdd, task in tasks:
            sample = task.sample_metrics()
            reports.append(TaskMetricsReport(
                tdd.job_id, tdd.job_name, tdd.vertex_id, tdd.vertex_name, tdd.subtask, tdd.attempt, dict(sample),
                tuple(task.metrics.last_user_metrics), task.metrics.late_dropped_snapshot(),
                ended, _operator_ids(tdd, task),
            ))
            sample.update(attempt=tdd.attempt, tm=self.cfg.tm_id, slot=self.cfg.slot, ts=now_ms())
            key, field = redis_keys.task_metrics(tdd.job_id), f"{tdd.vertex_id}:{tdd.subtask}"
            pipe.hset(key, field, messages.seal_report(sample, self.cfg.cluster_secret, "metrics", key, field))
            pipe.expire(key, METRICS_TTL_S)
        self._send_to_taskmanager(reports)  # first: a Redis outage does not blind the endpoint
        pipe.execute()

    def _send_to_taskmanager(self, reports: list[TaskMetricsReport]) -> None:
        if self.metrics_pipe is None:
            return
        try:
            self._to_taskmanager.put_nowait(encode_reports(reports))
        except queue.Full:
            pass  # the TaskManager is behind: it misses this sample (an ended task's entry then ages out)
        except (ValueError, TypeError) as e:  # a figure msgpack cannot carry: this report is lost, not the next
            log.warning("metrics not sent to the TaskManager: %s", e)

    def _taskmanager_sender(self) -> None:
        pipe = self.metrics_pipe
        while pipe is not None and not self.stopping.is_set():
            try:
                data = self._to_taskmanager.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                pipe.send_bytes(data)
            except OSError as e:  # the TaskManager is gone: this slot dies with it
                log.warning("metrics no longer sent to the TaskManager: %s", e)
                self.metrics_pipe = None
                return

    def metrics_loop(self) -> None:
        while not self.stopping.wait(METRICS_INTERVAL_S):
            with self.lock:
                running = [(r.tdd, r.task) for r in self.tasks.values()]
            try:
                self._publish_metrics(running)
            except redis.RedisError:
                log.warning("could not publish metrics", exc_info=True)

    def serve(self) -> None:
        threading.Thread(target=self.metrics_loop, name="metrics", daemon=True).start()
        if self.metrics_pipe is not None:
            threading.Thread(target=self._taskmanager_sender, name="metrics-to-taskmanager", daemon=True).start()
        while not self.stopping.is_set():
            try:
                got = self.client.blpop([self.inbox], timeout=0.5)
            except redis.RedisError as e:  # Redis away or restarting: keep serving once it is back
                log.warning("cannot read the slot inbox: %s", e)
                self.stopping.wait(0.5)
                continue
            if got:
                try:
                    self.handle(messages.open_message(got[1], self.cfg.cluster_secret, self.inbox, self.replay))
                except messages.Unauthenticated:
                    pass  # dropped: logged and counted where it was refused; nothing in it was read
                except Exception:
                    log.exception("bad control message")
            else:
                self._release_if_idle()

    def _release_if_idle(self) -> None:
        """Free what ended jobs left behind, or the slot's memory creeps up per job. Not the moment
        the slot runs out of tasks: a job's sources often end before its other tasks are deployed
        here, and the full collection holds the interpreter lock, so those deploys waited for it
        (60 ms in a fresh slot, a first job's whole run). Once the inbox stayed quiet for a poll, a
        deploy is unlikely to be on its way."""
        with self.lock:
            if not self.release_pending or self.tasks:
                return
            self.release_pending = False
        release_free_memory()


def slot_main(cfg: SlotConfig, metrics_pipe: Connection | None = None, log_pipe: Connection | None = None) -> None:
    """Entry point of the slot process."""
    _die_with_parent(cfg.parent_pid)
    sys.setswitchinterval(SWITCH_INTERVAL_S)  # before any task thread starts (see the constant)
    gc.set_threshold(*GC_THRESHOLDS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the TaskManager's to handle
    if log_pipe is not None:
        process_logging.log_to_pipe(log_pipe)  # into the TaskManager's log file
    else:
        process_logging.configure(None)
    seal_state_files(cfg.cluster_secret)  # state files this slot writes and restores from are sealed
    if cfg.unsealed_benchmark:
        unseal_for_benchmark()
    # User code runs here: a shipped module or a function body importing ``pyflink`` must get
    # Millstream's API even where apache-flink is installed (a plain import would get Apache's).
    install_pyflink_alias()
    client = redis.Redis.from_url(cfg.redis_url, socket_keepalive=True, health_check_interval=30)
    # The JobManager may be on another host: the log goes to Redis too (engine/taskexecutor/log_shipper.py).
    ship_logs(client, cfg.tm_id, cfg.cluster_secret, process_logging.SLOT_FORMAT)
    stdout = TaskStdout(sys.stdout, StdoutForwarder(client, secret=cfg.cluster_secret))
    sys.stdout = stdout  # print() in user functions, too, reaches the job's print stream
    executor = SlotExecutor(cfg, client, stdout, metrics_pipe)
    # What start-up loaded lives as long as the slot: out of the collector's way, every full
    # collection (one per ended job, see _release_if_idle) walks only what jobs created.
    gc.freeze()
    executor.serve()
