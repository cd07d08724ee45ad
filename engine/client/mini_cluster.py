"""MiniCluster: runs a job in this process, one thread per subtask, over in-memory channels.

This is PyFlink's local execution. Each subtask gets its own deserialised
copy of the user code, as it would on a cluster, so a function that cannot be
pickled fails here too rather than only after deployment.
"""
from __future__ import annotations

import os
import queue
import shutil
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Iterator


from millstream.engine.client.collect_result_buffer import CollectResultBuffer
from millstream.engine.client.job_client import CloseableIterator
from millstream.engine.common.job_execution_result import JobExecutionException, JobExecutionResult
from millstream.engine.graph.job_graph import JobGraph
from millstream.engine.graph.stream_graph import StreamGraph
from millstream.engine.graph.validation import validate_job_graph
from millstream.engine.runtime.collect import CollectEntry
from millstream.engine.runtime.deployment import make_tdd
from millstream.engine.runtime.io.channel import TaskCancelled
from millstream.engine.runtime.io.local_channels import LocalChannelRegistry
from millstream.engine.runtime.user_code_class_loader import load_user_code
from millstream.engine.runtime.stream_task import StreamTask, TaskEnvironment
from millstream.engine.taskexecutor.task_stdout import TaskStdout
from millstream.engine.runtime.python_dependencies import activate, materialize, user_code_of

_print_lock = threading.Lock()


def _print_line(text: str) -> None:
    with _print_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


class LocalJobClient:
    def __init__(self, job_graph: JobGraph, stream_graph: StreamGraph, credits: int = 8) -> None:
        self.job_graph = job_graph
        self.status = "CREATED"
        self.failure: str | None = None
        self.started = time.time()
        self.ended: float | None = None
        self._cancelled = threading.Event()
        self.results = LocalCollectGateway(self._cancelled)
        self._done = threading.Event()
        self._lock = threading.Lock()
        registry = LocalChannelRegistry(credits)
        self.state_dir = tempfile.mkdtemp(prefix="millstream-state-")
        # Packed and unpacked as on a cluster, so files added with add_python_file behave the same here.
        shipped = materialize(user_code_of(stream_graph), os.path.join(self.state_dir, "python-files"))
        activate(shipped.python_path)
        payload = shipped.graph
        # The job's functions find its archives by relative path: the process works in their
        # directory while the job runs, and goes back when it ends.
        self._previous_cwd = None
        if shipped.working_dir is not None:
            self._previous_cwd = os.getcwd()
            os.chdir(shipped.working_dir)
        self.tasks: list[StreamTask] = []
        for v in job_graph.vertices:
            for i in range(v.parallelism):
                tdd = make_tdd(job_graph, v.id, i, 0)
                env = TaskEnvironment(
                    channels=registry.factory(self._cancelled),
                    cancelled=self._cancelled,
                    print_line=_print_line,
                    collect=self.results,
                    state_dir=self.state_dir,
                )
                self.tasks.append(StreamTask(tdd, load_user_code(payload), env))
        self._remaining = len(self.tasks)
        if not isinstance(sys.stdout, TaskStdout):  # task threads' print() lines come out whole
            sys.stdout = TaskStdout(sys.stdout, None)
        self.stdout = sys.stdout
        self.threads = [
            threading.Thread(target=self._run_task, args=(t,), name=t.name, daemon=True) for t in self.tasks
        ]
        self.status = "RUNNING"
        for th in self.threads:
            th.start()

    def _run_task(self, task: StreamTask) -> None:
        self.stdout.bind(task.tdd.job_id)
        try:
            task.run()
        except TaskCancelled:
            pass
        except BaseException:
            with self._lock:
                if self.failure is None:
                    self.failure = f"{task.name}: {traceback.format_exc()}"
                    self.status = "FAILING"
            self._cancelled.set()
        finally:
            self.stdout.unbind()
            with self._lock:
                self._remaining -= 1
                if self._remaining == 0:
                    self.ended = time.time()
                    if self.failure is not None:
                        self.status = "FAILED"
                    elif self._cancelled.is_set():
                        self.status = "CANCELED"
                    else:
                        self.status = "FINISHED"
                    if self._previous_cwd is not None:
                        os.chdir(self._previous_cwd)
                    shutil.rmtree(self.state_dir, ignore_errors=True)
                    self._done.set()
                    self.results.end()  # an iterator waiting for entries learns at once that none will come

    # -- JobClient ----------------------------------------------------------
    def get_job_id(self) -> str:
        return self.job_graph.job_id

    def get_job_status(self) -> str:
        return self.status

    def cancel(self) -> None:
        with self._lock:
            if self.status == "RUNNING":
                self.status = "CANCELLING"
        self._cancelled.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def get_job_execution_result(self) -> JobExecutionResult:
        self._done.wait()
        if self.status != "FINISHED":
            raise JobExecutionException(self.get_job_id(), self.status, self.failure)
        return JobExecutionResult(self.get_job_id(), int(((self.ended or time.time()) - self.started) * 1000))

    def collect(self, node_id: int, limit: int | None) -> CloseableIterator:
        buffer = CollectResultBuffer()

        def gen() -> Iterator[Any]:
            while True:
                ended = self._done.is_set()  # read first: entries put before the end are all there
                entries = self.results.take(0 if ended else 0.1)
                if entries:
                    yield from buffer.add(entries)
                elif ended:
                    if self.status == "FAILED":
                        raise JobExecutionException(self.get_job_id(), self.status, self.failure)
                    if self.status == "FINISHED":
                        yield from buffer.finish()
                    return

        return CloseableIterator(gen(), on_close=self._close_collect, limit=limit)

    def _close_collect(self) -> None:
        # Leaving the iterator early cancels an unbounded job, as PyFlink does.
        if not self._done.is_set():
            self.cancel()
            self._done.wait(30)


_JOB_ENDED: Any = object()  # put into the collect queue when the job ends: wakes a waiting iterator


class LocalCollectGateway:
    """The collect sink's gateway in a mini-cluster: a bounded queue the iterator drains. No
    checkpoints complete here, so records are final as they come; a full queue makes the sink wait."""

    gated = False
    replays = False  # nothing is lost between the sink and the iterator, and nothing restores

    def __init__(self, cancelled: threading.Event, max_entries: int = 64) -> None:
        self.cancelled = cancelled
        self.queue: "queue.Queue[CollectEntry]" = queue.Queue(max_entries)
        # Puts refused by the full queue: how a caller sees the sink waiting on an unread queue (each
        # one a try that found no room) rather than just not having been scheduled.
        self.refused_puts = 0

    def publish(self, entries: list[CollectEntry]) -> None:
        for e in entries:
            while True:
                if self.cancelled.is_set():
                    raise TaskCancelled()
                try:
                    self.queue.put(e, timeout=0.1)
                    break
                except queue.Full:
                    self.refused_puts += 1
                    continue

    def acknowledged(self, attempt: int) -> int:
        return 0  # never asked: the sink keeps nothing when the gateway does not replay

    def await_acknowledged(self, attempt: int, position: int) -> int:
        raise RuntimeError("a mini-cluster's collect sink keeps no records to wait for")

    def end(self) -> None:
        """The job ended: wake an iterator waiting in ``take`` (it used to wait out its timeout,
        twice, which was most of a short job's time in a mini-cluster)."""
        try:
            self.queue.put_nowait(_JOB_ENDED)
        except queue.Full:
            pass  # entries are waiting: no iterator is blocked on an empty queue

    def take(self, wait_s: float = 0.1) -> list[CollectEntry]:
        """What the sink published so far (waiting up to ``wait_s`` for the first entry)."""
        try:
            first = self.queue.get(timeout=wait_s) if wait_s > 0 else self.queue.get_nowait()
        except queue.Empty:
            return []
        out = [] if first is _JOB_ENDED else [first]
        while True:
            try:
                e = self.queue.get_nowait()
            except queue.Empty:
                return out
            if e is not _JOB_ENDED:
                out.append(e)


class MiniCluster:
    def __init__(self, credits: int = 8) -> None:
        self.credits = credits

    def submit(self, job_graph: JobGraph, stream_graph: StreamGraph) -> LocalJobClient:
        """Run the job in this process; a graph a cluster would refuse (``validate_job_graph``: a bad
        option, a cycle) is refused here too, with the same message, before any task starts."""
        validate_job_graph(job_graph)
        return LocalJobClient(job_graph, stream_graph, self.credits)
