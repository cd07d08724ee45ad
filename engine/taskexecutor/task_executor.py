"""The TaskManager process: registers its slots, heartbeats, and supervises slot processes.

Registration is a hash entry in Redis; liveness is a key with a TTL refreshed
every heartbeat interval, so a killed TaskManager simply stops existing once
the TTL runs out. Both, and the TaskManager's metrics, are sealed with the
cluster secret (engine/taskexecutor/messages.py ``seal_report``). A slot process that dies is reported to the JobManager
(its tasks are lost) and started again.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass

import psutil
import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from millstream.engine import redis_keys
from millstream.engine.taskexecutor import messages
from millstream.engine.runtime import process_logging
from millstream.engine.taskexecutor.log_shipper import ship_logs
from millstream.engine.taskexecutor.metrics_server import MetricsServer, SlotMetricsReceiver, TaskManagerCollector, TaskMetricsStore
from millstream.engine.taskexecutor.process_tree_cpu import ProcessTreeCpu
from millstream.engine.taskexecutor.slot_process import SlotConfig, slot_main

log = logging.getLogger("millstream.taskmanager")


@dataclass(frozen=True)
class TaskManagerConfig:
    redis_url: str
    data_redis_urls: tuple[str, ...] = ()  # data servers channels are sharded over; empty: redis_url
    slots: int = 2
    heartbeat_interval_ms: int = 1000
    heartbeat_timeout_ms: int = 10_000
    credits: int = 8
    buffer_records: int = 1024
    host: str = "127.0.0.1"
    tm_id: str | None = None
    log_file: str | None = None
    state_dir: str | None = None  # on-disk keyed state (state.backend=rocksdb) lives under here
    cluster_secret: str | None = None  # checks the signature of user code before it is unpickled
    checkpoint_dir: str | None = None  # the default checkpoint storage as this host sees it, advertised for the REST API
    unsealed_benchmark: bool = False  # benchmark only (engine/security/mac.py unseal_for_benchmark): slots too
    # The Prometheus endpoint (engine/taskexecutor/metrics_server.py): bound on ``host``; 0 picks a free
    # port, None serves none. Advertised in the registration, so the JobManager lists it at /metrics/targets.
    metrics_port: int | None = 0
    metrics_token: str | None = None  # with the REST API's read token set, a scrape needs it too


def new_taskmanager_id(host: str) -> str:
    return f"{host}:{os.getpid()}-{uuid.uuid4().hex[:6]}"


class TaskExecutor:
    def __init__(self, cfg: TaskManagerConfig) -> None:
        self.cfg = cfg
        self.id = cfg.tm_id or new_taskmanager_id(cfg.host)
        # Heartbeats are idempotent, so redis-py may retry them itself across a short outage.
        self.client = redis.Redis.from_url(
            cfg.redis_url, socket_keepalive=True, retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 3),
            retry_on_error=[redis.ConnectionError, redis.TimeoutError],
        )
        self.ctx = multiprocessing.get_context("spawn")
        # Slot processes log over a pipe each into these handlers: this process's log file, not the
        # Redis shipper (a slot ships its own lines). See engine/runtime/process_logging.py.
        self.log_handlers: list[logging.Handler] = list(logging.getLogger().handlers)
        self.log_readers: dict[int, threading.Thread] = {}
        self.slots: dict[int, multiprocessing.process.BaseProcess] = {}
        self.stopping = threading.Event()
        self.started_ms = int(time.time() * 1000)
        # Slots send their subtasks' metrics samples here over a pipe; a scrape reads the latest.
        self.metrics_store = TaskMetricsStore()
        self.metrics_receiver = SlotMetricsReceiver(self.metrics_store, self.stopping)
        self.metrics_server: MetricsServer | None = None
        self.last_status: dict[str, object] = {}  # the figures of the last heartbeat, for the endpoint
        self._cpu_tree = ProcessTreeCpu()  # kept between heartbeats: it measures from one to the next

    def _start_metrics_server(self) -> None:
        if self.cfg.metrics_port is None:
            return
        try:
            self.metrics_server = MetricsServer(
                TaskManagerCollector(self.metrics_store, self.id, self.cfg.host, lambda: self.last_status),
                self.cfg.host, self.cfg.metrics_port,
                self.cfg.metrics_token,
            )
        except OSError as e:  # a taken port costs the endpoint, not the TaskManager
            log.error("no Prometheus endpoint: cannot bind %s:%s: %s", self.cfg.host, self.cfg.metrics_port, e)
            return
        self.metrics_server.start()
        self.metrics_receiver.start()
        log.info("Prometheus metrics on http://%s:%d/metrics", self.cfg.host, self.metrics_server.port)

    def _start_slot(self, i: int) -> None:
        state_dir = os.path.join(self.cfg.state_dir, self.id.replace(":", "_")) if self.cfg.state_dir else None
        cfg = SlotConfig(
            self.id, i, self.cfg.redis_url, self.cfg.credits, self.cfg.buffer_records, state_dir, self.cfg.cluster_secret,
            unsealed_benchmark=self.cfg.unsealed_benchmark, data_redis_urls=self.cfg.data_redis_urls, parent_pid=os.getpid(),
        )
        self.metrics_receiver.remove_slot(i)  # a restarted slot's old subtasks are gone
        metrics_pipe = None
        if self.metrics_server is not None:
            reader, metrics_pipe = self.ctx.Pipe(duplex=False)
            self.metrics_receiver.add(i, reader)
        log_reader, log_writer = self.ctx.Pipe(duplex=False)
        p = self.ctx.Process(target=slot_main, args=(cfg, metrics_pipe, log_writer), name=f"slot-{i}", daemon=False)
        p.start()
        # The slot holds the writing ends; ours closed lets each reader see the slot die.
        log_writer.close()
        self.log_readers[i] = process_logging.forward(log_reader, self.log_handlers, f"slot-{i}")
        if metrics_pipe is not None:
            metrics_pipe.close()
        self.slots[i] = p

    def _info(self) -> bytes:
        vm = psutil.virtual_memory()
        return messages.seal_report(
            {
                "id": self.id,
                "host": self.cfg.host,
                "pid": os.getpid(),
                "slots": self.cfg.slots,
                "started": self.started_ms,
                "cpu_cores": psutil.cpu_count() or 1,
                "physical_memory": vm.total,
                "log_file": self.cfg.log_file,
                "checkpoint_dir": self.cfg.checkpoint_dir,
                "metrics_port": self.metrics_server.port if self.metrics_server is not None else None,
            },
            self.cfg.cluster_secret, "registration", self.id,
        )

    def _cpu_load(self) -> float:
        """This TaskManager's own CPU since the last heartbeat, as a share of the host's cores: its
        process tree's (itself, its slot processes and what they fork), not the host's figure, which
        would show other processes' load as ours."""
        return self._cpu_tree.load()

    @staticmethod
    def _tree_rss() -> int:
        """Resident memory of this TaskManager's whole process tree: itself, its slot processes and
        what they start (a heap snapshot's forked child, a requirements install). A forked child's
        copy-on-write pages count in it and in its parent alike, as ``ps`` shows them: the figure is an
        upper bound while a snapshot is being written."""
        root = psutil.Process()
        rss = root.memory_info().rss
        for child in root.children(recursive=True):
            try:
                rss += child.memory_info().rss
            except psutil.Error:
                pass  # it ended between the listing and the read
        return rss

    def _heartbeat(self) -> None:
        vm = psutil.virtual_memory()
        status = {"cpu_load": self._cpu_load(), "free_memory": vm.available, "rss": self._tree_rss(), "ts": int(time.time() * 1000)}
        self.last_status = status
        pipe = self.client.pipeline(transaction=False)
        pipe.hset(redis_keys.TASKMANAGERS, self.id, self._info())
        # Sealed with the time it was sent: the JobManager counts a heartbeat only when that time
        # moves on, so a copy of an old one set again by someone else keeps no dead TaskManager alive.
        beat = messages.seal_report({"ts": int(time.time() * 1000)}, self.cfg.cluster_secret, "heartbeat", self.id)
        pipe.set(redis_keys.taskmanager_heartbeat(self.id), beat, px=self.cfg.heartbeat_timeout_ms)
        pipe.set(
            redis_keys.taskmanager_metrics(self.id),
            messages.seal_report(status, self.cfg.cluster_secret, "tm-metrics", self.id),
            px=self.cfg.heartbeat_timeout_ms,
        )
        pipe.execute()

    def _supervise(self) -> None:
        for i, p in list(self.slots.items()):
            if not p.is_alive() and not self.stopping.is_set():
                reason = f"slot process {i} of TaskManager {self.id} exited with code {p.exitcode}"
                log.error(reason)
                self.client.rpush(
                    redis_keys.JOBMANAGER_INBOX,
                    messages.seal(
                        messages.slot_lost(self.id, i, int(time.time() * 1000), reason),
                        self.cfg.cluster_secret, redis_keys.JOBMANAGER_INBOX,
                        messages.current_epoch(self.client, self.cfg.cluster_secret),  # the JobManager's now
                    ),
                )
                self._start_slot(i)

    def run(self) -> None:
        log.info("TaskManager %s starting with %d slots", self.id, self.cfg.slots)
        self._start_metrics_server()
        for i in range(self.cfg.slots):
            # Stale deployments addressed to a previous TaskManager with this id are dropped.
            self._delete_when_reachable(redis_keys.slot_inbox(self.id, i))
            self._start_slot(i)
        interval = self.cfg.heartbeat_interval_ms / 1000
        while not self.stopping.is_set():
            try:
                self._heartbeat()
                self._supervise()
            except redis.RedisError as e:
                log.warning("heartbeat failed: %s", e)
            self.stopping.wait(interval)
        self.shutdown()

    def _delete_when_reachable(self, key: str) -> None:
        """A TaskManager started while Redis is away waits for it, with backoff, instead of dying."""
        delay = 0.1
        while not self.stopping.is_set():
            try:
                self.client.delete(key)
                return
            except (redis.AuthenticationError, redis.exceptions.AuthorizationError):
                raise  # a configuration error, not an outage to wait out
            except redis.RedisError as e:
                log.warning("waiting for Redis: %s", e)
                self.stopping.wait(delay)
                delay = min(delay * 2, 2.0)

    def stop(self, *_: object) -> None:
        self.stopping.set()

    def shutdown(self) -> None:
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.hdel(redis_keys.TASKMANAGERS, self.id)
            pipe.delete(redis_keys.taskmanager_heartbeat(self.id))
            pipe.execute()
        except redis.RedisError:
            pass
        if self.metrics_server is not None:
            self.metrics_server.stop()
        for p in self.slots.values():
            p.terminate()
        for p in self.slots.values():
            p.join(5)
            if p.is_alive():
                p.kill()
        log.info("TaskManager %s stopped", self.id)


def run_taskmanager(cfg: TaskManagerConfig) -> None:
    # Before the Redis shipper joins the root logger: the slots ship their own lines, so what they
    # send this process goes to its log file (or stderr) only.
    te = TaskExecutor(cfg)
    # The JobManager may be on another host: the log goes to Redis too (engine/taskexecutor/log_shipper.py).
    ship_logs(te.client, te.id, cfg.cluster_secret, process_logging.FORMAT)
    signal.signal(signal.SIGTERM, te.stop)
    signal.signal(signal.SIGINT, te.stop)
    try:
        te.run()
    finally:
        for reader in te.log_readers.values():
            reader.join(2)  # what the slots logged last, once they have exited

