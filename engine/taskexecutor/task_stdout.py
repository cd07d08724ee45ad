"""A slot process's stdout: every line still goes to the process's stdout (Flink's ``.out``), and the
lines a job prints (its print() sinks, and print() calls in its user functions) also go to that job's
print stream in Redis, for attached clients (``millstream.engine.runtime.io.job_stdout``).

A task thread binds itself to its job; a line written by a thread that is not bound (a SourceFunction's
own thread) goes to the job when only one job runs in the slot, as is the rule with slot sharing and a
single job; otherwise it stays on the process's stdout only.

A task's lines reach stdout whole: print() writes its text and its newline in two calls, which threads
printing at once would interleave (``map saw 02> 10``), so a task's unfinished line waits for its
newline. Without a forwarder (the in-process mini-cluster) that is all it does.
"""
from __future__ import annotations

import io
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # a mini-cluster's tasks print without Redis: it need not import a Redis client
    from millstream.engine.runtime.io.job_stdout import StdoutForwarder


class TaskStdout(io.TextIOBase):
    """Installed as ``sys.stdout`` in a slot process (and, without forwarding, by the mini-cluster)."""

    def __init__(self, real: TextIO, forwarder: StdoutForwarder | None) -> None:
        self.real = real
        self.forwarder = forwarder
        self._local = threading.local()
        self._lock = threading.Lock()  # one write at a time on the real stream, so lines never interleave
        self._jobs: Counter[str] = Counter()  # job -> bound task threads

    # -- binding -----------------------------------------------------------------------------
    def bind(self, job_id: str) -> None:
        """The calling (task) thread prints for ``job_id`` until ``unbind``."""
        self._local.job = job_id
        self._local.partial = ""
        with self._lock:
            self._jobs[job_id] += 1

    def unbind(self) -> None:
        job = getattr(self._local, "job", None)
        if job is None:
            return
        partial = self._local.partial
        if partial:  # a last print(..., end="") still belongs to the job
            with self._lock:
                self.real.write(partial)
            if self.forwarder is not None:
                self.forwarder.write(job, [partial])
        self._local.job = None
        self._local.partial = ""
        with self._lock:
            self._jobs[job] -= 1
            if self._jobs[job] <= 0:
                del self._jobs[job]

    def _job(self) -> str | None:
        job = getattr(self._local, "job", None)
        if job is not None:
            return job
        with self._lock:
            return next(iter(self._jobs)) if len(self._jobs) == 1 else None

    # -- writing -----------------------------------------------------------------------------
    def print_line(self, job_id: str, text: str) -> None:
        """A print() sink's batch of lines (joined by newlines), for ``job_id``."""
        with self._lock:
            self.real.write(text + "\n")
            self.real.flush()
        if self.forwarder is not None:
            self.forwarder.write(job_id, text.split("\n"))

    def write(self, s: str) -> int:
        if not s:
            return 0
        job = self._job()
        if job is None:  # not a task's: straight through (after what it left unfinished meanwhile)
            pending, self._local.partial = getattr(self._local, "partial", ""), ""
            with self._lock:
                self.real.write(pending + s)
            return len(s)
        *lines, self._local.partial = (getattr(self._local, "partial", "") + s).split("\n")
        if lines:
            with self._lock:
                self.real.write("\n".join(lines) + "\n")
            if self.forwarder is not None:
                self.forwarder.write(job, lines)
        return len(s)

    def flush(self) -> None:
        # A thread that is no task's (the program's own) gets its unfinished line out on flush, as
        # print(..., end="", flush=True) expects; a task's waits for its newline, to stay whole.
        pending = "" if getattr(self._local, "job", None) else getattr(self._local, "partial", "")
        self._local.partial = "" if pending else getattr(self._local, "partial", "")
        with self._lock:
            self.real.write(pending)
            self.real.flush()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.real.fileno()

    def isatty(self) -> bool:
        return self.real.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.real, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)
