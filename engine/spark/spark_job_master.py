"""SparkJobMaster: the JobManager's side of a bounded job that runs on Spark.

It has the public interface of ``millstream.engine.jobmanager.job_master.JobMaster``, so
the Dispatcher drives it the same way, but it needs no TaskManager slots: it
starts one Spark driver process (``millstream.engine.spark.driver``), polls it on
``tick``, and mirrors it coarsely in the ExecutionGraph (every subtask
RUNNING while the driver runs, then FINISHED, FAILED or CANCELED).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO, Any, Callable

import redis

from millstream.engine import redis_keys

from millstream.engine.executiongraph.archived import job_record
from millstream.engine.executiongraph.execution_graph import ExecutionGraph, now_ms
from millstream.engine.executiongraph.states import ExecutionState, JobStatus
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.jobmanager.job_store import ExceptionRecord, JobRecord, JobStore
from millstream.engine.resourcemanager.slot_pool import SlotPool
from millstream.engine.spark.driver import EXIT_CANCELED, EXIT_FINISHED, EXIT_UNTRANSLATABLE
from millstream.engine.spark.spark_cancel import spark_cancel_value
from millstream.engine.spark.validation import check_job_graph
from millstream.engine.taskexecutor.gateway import TaskExecutorGateway

log = logging.getLogger("millstream.sparkjobmaster")

#: What a Spark driver needs from the JobManager's environment: finding programs, Python, Java,
#: Spark and Hadoop, and the locale. Nothing else passes (the JobManager's secrets, the database).
_DRIVER_ENV_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "TEMP", "TMP", "PYTHONPATH", "PYTHONHASHSEED",
    "VIRTUAL_ENV", "SYSTEMROOT", "JAVA_HOME",
})
_DRIVER_ENV_PREFIXES = ("LC_", "SPARK_", "PYSPARK_", "HADOOP_", "YARN_", "JAVA_")


def driver_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The Spark driver's environment: the variables of ``environ`` (default: this process's) that
    Spark and Python need, and none of the secrets (engine/security/process_hardening.py)."""
    env = dict(os.environ if environ is None else environ)
    kept = {k: v for k, v in env.items() if k in _DRIVER_ENV_NAMES or k.startswith(_DRIVER_ENV_PREFIXES)}
    kept["PYTHONUNBUFFERED"] = "1"
    return kept

CANCEL_TIMEOUT_MS = 30_000  # a driver that ignores SIGTERM this long is killed
STDERR_TAIL_CHARS = 20_000  # how much of a driver's stderr an exception record keeps
DRIVER_TASK_NAME = "Spark driver"


class SparkJobMaster:
    def __init__(
        self,
        job_graph: JobGraph,
        user_code: bytes,
        gateway: TaskExecutorGateway,
        store: JobStore,
        clock: Callable[[], float] = time.time,
        metrics_reader: Callable[[str, int], dict[tuple[str, int], dict[str, Any]]] | None = None,
        spark_master: str = "local[*]",
        redis_url: str = "redis://127.0.0.1:6379/0",
        spark_conf: dict[str, str] | None = None,
        python: str = sys.executable,
    ) -> None:
        check_job_graph(job_graph)  # UntranslatableJob: the Dispatcher answers 400 with its message
        self.job_graph = job_graph
        self.user_code = user_code
        self._code_saved = False  # stored once, with the first record, as the streaming JobMaster does
        self.gateway = gateway
        self.store = store
        self.clock = clock
        self.metrics_reader = metrics_reader  # unused: Spark reports progress, not per-subtask metrics
        self.spark_master = spark_master
        self.redis_url = redis_url
        self.spark_conf = dict(spark_conf or {})
        self.python = python
        self.eg = ExecutionGraph.from_job_graph(job_graph, self._now())
        self.cancel_requested_at: int | None = None
        self.final_metrics: dict[tuple[str, int], dict[str, Any]] = {}
        self.final_progress: dict[str, Any] | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.work_dir: str | None = None
        self._stderr: IO[bytes] | None = None
        self._client: redis.Redis | None = None

    @property
    def job_id(self) -> str:
        return self.job_graph.job_id

    @property
    def status(self) -> JobStatus:
        return self.eg.status

    def _now(self) -> int:
        return now_ms(self.clock)

    def _redis(self) -> redis.Redis:
        if self._client is None:
            self._client = redis.Redis.from_url(self.redis_url)
        return self._client

    # -- scheduling ------------------------------------------------------------
    def try_schedule(self, pool: SlotPool) -> bool:
        """Start the driver; Spark brings its own executors, so no slots are needed."""
        if self.eg.status is not JobStatus.CREATED:
            return False
        self.eg.status_message = None
        at = self._now()
        try:
            self._start_driver()
        except Exception as e:
            self.eg.transition(JobStatus.RUNNING, at)
            self._set_tasks(ExecutionState.RUNNING, at)
            self._fail(f"could not start the Spark driver: {e}", repr(e), type(e).__name__, pool)
            return True
        self.eg.transition(JobStatus.RUNNING, at)
        self._set_tasks(ExecutionState.RUNNING, at)
        self.persist()
        return True

    def _start_driver(self) -> None:
        self.work_dir = tempfile.mkdtemp(prefix=f"millstream-spark-{self.job_id}-")
        graph_path = os.path.join(self.work_dir, "jobgraph.json")
        code_path = os.path.join(self.work_dir, "usercode.bin")
        with open(graph_path, "w") as f:
            json.dump(self.job_graph.to_dict(), f)
        with open(code_path, "wb") as f:
            f.write(self.user_code)
        cmd = [
            self.python, "-m", "millstream.engine.spark.driver",
            "--job-id", self.job_id,
            "--secrets-stdin",  # the Redis URL (its password) and the cluster secret: never in argv or a file
            "--spark-master", self.spark_master,
            "--job-graph", graph_path,
            "--user-code", code_path,
            "--error-file", self._error_path(),
        ]
        for k, v in self.spark_conf.items():
            cmd += ["--conf", f"{k}={v}"]
        # Sent down a pipe the driver reads once at start: argv is visible to every user in ps, and a
        # file or an environment variable would be readable by the user code of the job (the driver's
        # Spark executors and Python workers run as the same user and inherit its environment).
        handover = json.dumps({"redis_url": self.redis_url, "cluster_secret": getattr(self.gateway, "cluster_secret", None)})
        self._stderr = open(os.path.join(self.work_dir, "driver.err"), "w+b")
        with open(os.path.join(self.work_dir, "driver.out"), "wb") as out:
            # Its own session, so a Ctrl-C aimed at the JobManager does not reach it twice; its own
            # environment, so it inherits none of the JobManager's secrets.
            self.process = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=out, stderr=self._stderr, start_new_session=True,
                env=driver_environment(),
            )
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(handover.encode() + b"\n")
            self.process.stdin.close()
        except BrokenPipeError:
            pass  # the driver died at once: tick() reports its exit and stderr

    def _error_path(self) -> str:
        assert self.work_dir is not None
        return os.path.join(self.work_dir, "error.txt")

    def _set_tasks(self, state: ExecutionState, at: int) -> None:
        order = {
            ExecutionState.RUNNING: (ExecutionState.SCHEDULED, ExecutionState.DEPLOYING, ExecutionState.RUNNING),
        }.get(state, (state,))
        for _, ev in self.eg.all_executions():
            for s in order:
                ev.current.transition(s, at)

    # -- events: TaskManagers play no part in a Spark job ----------------------------
    def on_task_state(self, msg: dict[str, Any], pool: SlotPool) -> None:
        pass

    def on_taskmanager_lost(self, tm_id: str, reason: str, pool: SlotPool) -> None:
        pass

    def on_slot_lost(self, tm_id: str, slot: int, reason: str, pool: SlotPool) -> None:
        pass

    def on_redis_lost(self, reason: str, pool: SlotPool) -> None:
        """Redis came back as a new, empty server: the driver's results not yet read, its progress
        and its print lines are gone, and a BATCH job has no checkpoint to resume from, so it
        fails (its driver stopped) rather than hand its client an incomplete result as complete."""
        if self.eg.status.is_terminal() or self.process is None:
            return
        self._signal(signal.SIGKILL)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            log.warning("the Spark driver of job %s did not exit after SIGKILL", self.job_id)
        cause = f"{reason}; a BATCH job on Spark cannot resume without them: submit it again"
        self._fail(cause, cause, "RedisConnectionLost", pool)

    # -- transitions ---------------------------------------------------------------
    def cancel(self, pool: SlotPool) -> bool:
        """Request cancellation; False if the job already ended."""
        if self.eg.status.is_terminal():
            return False
        if self.eg.status in (JobStatus.CANCELLING, JobStatus.FAILING):
            return True
        at = self._now()
        self.eg.transition(JobStatus.CANCELLING, at)
        if self.process is None:
            self._set_tasks(ExecutionState.CANCELED, at)
        else:
            self._set_tasks(ExecutionState.CANCELING, at)
            self.cancel_requested_at = at
            try:
                self._redis().set(
                    redis_keys.spark_cancel(self.job_id),
                    spark_cancel_value(getattr(self.gateway, "cluster_secret", None), self.job_id),
                    ex=redis_keys.SPARK_PROGRESS_TTL_S,
                )
            except redis.RedisError:
                log.warning("could not set the cancel key of job %s", self.job_id, exc_info=True)
            self._signal(signal.SIGTERM)  # the driver cancels its Spark job group
        self.persist()
        self.check_completion(pool)
        return True

    def _signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.send_signal(sig)
            except ProcessLookupError:
                pass

    def check_completion(self, pool: SlotPool) -> None:
        """Finish the job once the driver has exited (or was never started and the job was cancelled)."""
        if self.eg.status.is_terminal():
            return
        if self.process is None:
            if self.eg.status is JobStatus.CANCELLING:
                self._finish(JobStatus.CANCELED, pool)
            return
        rc = self.process.poll()
        if rc is None:
            return
        if self.eg.status is JobStatus.CANCELLING or rc == EXIT_CANCELED:
            self._set_tasks(ExecutionState.CANCELED, self._now())
            if self.eg.status is JobStatus.RUNNING:
                self.eg.transition(JobStatus.CANCELLING, self._now())
            self._finish(JobStatus.CANCELED, pool)
        elif rc == EXIT_FINISHED:
            self._set_tasks(ExecutionState.FINISHED, self._now())
            self._finish(JobStatus.FINISHED, pool)
        else:
            report = self._failure_report(rc)
            name = "UntranslatableJob" if rc == EXIT_UNTRANSLATABLE else _exception_name(report)
            self._fail(_last_line(report) or f"the Spark driver exited with status {rc}", report, name, pool)

    def _failure_report(self, rc: int) -> str:
        if self.work_dir and os.path.exists(self._error_path()):
            with open(self._error_path(), errors="replace") as f:
                text = f.read()
            if text.strip():
                return text
        # No report: the driver died hard (killed, JVM crash); its stderr tail says why.
        tail = ""
        if self._stderr is not None:
            self._stderr.flush()
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - STDERR_TAIL_CHARS))
            tail = self._stderr.read().decode(errors="replace")
        return f"{tail.rstrip()}\nthe Spark driver exited with status {rc}"

    def _fail(self, cause: str, stacktrace: str, exception_name: str, pool: SlotPool) -> None:
        at = self._now()
        self.store.add_exception(
            ExceptionRecord(
                jid=self.job_id,
                timestamp=at,
                exception_name=exception_name,
                stacktrace=stacktrace,
                task_name=DRIVER_TASK_NAME,
                endpoint=self.spark_master,
            )
        )
        for _, ev in self.eg.all_executions():
            if not ev.current.state.is_terminal():
                ev.current.transition(ExecutionState.FAILED, at)
                ev.current.failure = cause
        self.eg.failure_cause = cause
        self.eg.transition(JobStatus.FAILING, at)
        self._finish(JobStatus.FAILED, pool)

    def _finish(self, target: JobStatus, pool: SlotPool) -> None:
        self.final_progress = self._read_progress()
        self.eg.transition(target, self._now())
        pool.release(self.job_id)
        try:
            self.gateway.release_job(self.job_id)
            self._redis().delete(redis_keys.spark_cancel(self.job_id))
        except Exception:
            log.warning("could not clean up Redis keys of job %s", self.job_id, exc_info=True)
        self._cleanup()
        self.persist()

    def _cleanup(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def tick(self, pool: SlotPool) -> None:
        """Notice the driver's exit; kill a driver that ignores cancellation."""
        if self.eg.status.is_terminal() or self.process is None:
            return
        if (
            self.cancel_requested_at is not None
            and self.process.poll() is None
            and self._now() - self.cancel_requested_at >= CANCEL_TIMEOUT_MS
        ):
            self._signal(signal.SIGKILL)
            self.process.wait(5)
        self.check_completion(pool)

    # -- observation -----------------------------------------------------------------
    def _read_progress(self) -> dict[str, Any] | None:
        try:
            raw = self._redis().get(redis_keys.spark_progress(self.job_id))
        except redis.RedisError:
            return None
        return json.loads(raw) if raw else None

    def spark_progress(self) -> dict[str, Any]:
        """Spark's progress: ``applicationId``, ``uiWebUrl``, ``jobs`` and ``stages``
        (stageId, name, numTasks, numActiveTasks, numCompletedTasks, numFailedTasks)."""
        progress = self.final_progress if self.eg.status.is_terminal() else self._read_progress()
        return progress or {"applicationId": None, "uiWebUrl": None, "jobs": [], "stages": []}

    # -- persistence -------------------------------------------------------------
    def record(self, metrics: dict[tuple[str, int], dict[str, Any]] | None = None) -> JobRecord:
        code = None if self._code_saved else self.user_code
        record = job_record(self.job_graph, self.eg, metrics or self.final_metrics, code)
        record.spark = self.final_progress  # set once the job ended; live progress is read from Redis
        return record

    def persist(self) -> None:
        self.store.save_job(self.record())
        self._code_saved = True


def _last_line(text: str | None) -> str | None:
    if not text:
        return None
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else None


def _exception_name(report: str) -> str:
    """``ValueError`` from a last line like ``ValueError: boom``."""
    last = _last_line(report) or ""
    head = last.split(":", 1)[0].strip()
    return head.rsplit(".", 1)[-1] if head.replace(".", "").replace("_", "").isalnum() else "SparkJobFailure"
