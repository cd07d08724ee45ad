"""Where a Spark task's printed lines go: the executor's stdout, as before, and the job's print stream
in Redis (``millstream.engine.runtime.io.job_stdout``), so an attached client shows them as it does for a
streaming job: print() sinks and print() calls in user functions alike.

The driver names the stream in a Spark local property, the way Spark itself hands its tasks their job
group. In a PySpark worker, importing this module (``millstream.engine.spark.partitions`` does, and every task
of a Millstream job unpickles functions from there) installs ``WorkerStdout`` as ``sys.stdout``: each
line written while a task of a Millstream job runs is appended to that job's stream. Elsewhere (the
driver, plain-list tests) nothing changes.
"""
from __future__ import annotations

import io
import json
import sys
from typing import Any, Callable, TextIO

import redis

from millstream.engine.runtime.io.job_stdout import LineNumbering, append_lines

LOCAL_PROPERTY = "millstream.print-stream"

_clients: dict[str, redis.Redis] = {}  # one connection pool per Python worker (workers are reused)
# One numbered writer per job and task attempt: the JobManager keeps a row per writer it read, so a
# writer per call (each line) would grow that record with the lines.
_numbering: dict[tuple[str, int], LineNumbering] = {}


def set_print_stream(sc: Any, redis_url: str, job_id: str, key: str | None = None) -> None:
    """On the driver, before the job's actions run: their tasks append to ``job_id``'s stream, sealing
    each line with ``key`` (the job's stdout key, never the cluster secret: it travels to executors)."""
    sc.setLocalProperty(LOCAL_PROPERTY, json.dumps({"redis": redis_url, "job": job_id, "key": key}))


def _current_stream() -> tuple[redis.Redis, str, int, str | None] | None:
    """(client, job id, task attempt, stdout key) of the running task, if it belongs to a Millstream job."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - partitions run without Spark in unit tests
        return None
    tc = TaskContext.get()
    spec = tc.getLocalProperty(LOCAL_PROPERTY) if tc is not None else None
    if not spec:
        return None
    target = json.loads(spec)
    client = _clients.get(target["redis"])
    if client is None:
        client = _clients[target["redis"]] = redis.Redis.from_url(target["redis"])
    return client, target["job"], tc.taskAttemptId(), target.get("key")


_warned = False


def _forward(stream: tuple[redis.Redis, str, int, str | None], lines: list[str]) -> None:
    global _warned
    if not lines:
        return
    numbering = _numbering.get((stream[1], stream[2]))
    if numbering is None:
        if len(_numbering) > 1024:  # a worker runs many tasks: a task seen again gets a new writer id
            _numbering.clear()
        numbering = _numbering[(stream[1], stream[2])] = LineNumbering()
    try:
        append_lines(stream[0], stream[1], lines, key=stream[3], numbering=numbering)
    except redis.RedisError as e:
        # The lines are still on the executor's stdout; the job must not fail for a client's copy.
        if not _warned:
            sys.stderr.write(f"millstream: could not forward printed lines of job {stream[1]} to Redis: {e}\n")
            _warned = True


class WorkerStdout(io.TextIOBase):
    """``sys.stdout`` of a PySpark worker: everything to the real stdout; a task's whole lines also to
    its job's stream, synchronously, so they are in Redis before the task (and the job) ends."""

    def __init__(self, real: TextIO) -> None:
        self.real = real
        self._partial = ""  # an unfinished line of the task below (a worker runs one task at a time)
        self._task: tuple[redis.Redis, str, int, str | None] | None = None

    def write(self, s: str) -> int:
        self.real.write(s)
        stream = _current_stream() if s else None
        if stream is None:
            return len(s)
        if self._task is not None and self._task[2] != stream[2]:
            _forward(self._task, [self._partial] if self._partial else [])  # the last task's unfinished line
            self._partial = ""
        self._task = stream
        *lines, self._partial = (self._partial + s).split("\n")
        _forward(stream, lines)
        return len(s)

    def flush(self) -> None:
        self.real.flush()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.real.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.real, "encoding", "utf-8")


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def task_print_writer() -> Callable[[str], None]:
    """A print() sink's ``write(text)`` for newline-terminated lines, in a task."""
    if isinstance(sys.stdout, WorkerStdout):
        return _stdout  # forwarded by the worker's stdout
    stream = _current_stream()
    if stream is None:
        return _stdout

    def write(text: str) -> None:
        _stdout(text)
        _forward(stream, text[:-1].split("\n") if text.endswith("\n") else text.split("\n"))

    return write


def install_in_worker() -> None:
    """Route a PySpark worker's stdout through ``WorkerStdout`` (once per worker process)."""
    if "pyspark.worker" in sys.modules and not isinstance(sys.stdout, WorkerStdout):
        sys.stdout = WorkerStdout(sys.stdout)


install_in_worker()
