"""How Millstream's processes log: Flink's ``.log`` and ``.out`` split, rotation, and job context.

As in Flink, each JobManager and TaskManager has a log file (``<name>.log``, rotated by size) and a
separate stdout file (``<name>.out``) that receives what user code prints. A TaskManager's slot
processes do not write the log file themselves: several writers of one rotating file would rotate
under each other, so each sends its records over a pipe of its own that a thread of the TaskManager
process drains into its handlers. One pipe per slot, not one queue shared by all: a shared
multiprocessing queue has one write lock for every writer, and a slot SIGKILLed while holding it
would silence every other slot of its TaskManager for good. Inside the slot, records go first to an
in-process queue (the logging cookbook's QueueHandler / QueueListener pair) so that a task thread
never waits on the pipe.

Every line logged on a task's thread names the job and attempt (``[job 1a2b3c4d #2]``): the task
thread sets its context with ``task_log_context`` and a filter adds it to each record, so lines of a
TaskManager running several jobs can be told apart.
"""
from __future__ import annotations

import contextlib
import logging
import logging.handlers
import queue
import threading
from multiprocessing.connection import Connection
from multiprocessing.util import Finalize
from typing import Any, Iterator

FORMAT = "%(asctime)s %(levelname)s %(name)s%(job_context)s %(message)s"
#: what a slot process ships to Redis itself: the same, naming the slot (its process)
SLOT_FORMAT = "%(asctime)s %(levelname)s %(processName)s %(name)s%(job_context)s %(message)s"
#: defaults of the log file's rotation: Flink's log4j rolls at 100 MB and keeps 10 files
MAX_BYTES = 100 * 1024 * 1024
BACKUPS = 10

_context = threading.local()


@contextlib.contextmanager
def task_log_context(job_id: str, attempt: int) -> Iterator[None]:
    """Lines logged on this thread inside the block carry the job and attempt."""
    previous = getattr(_context, "text", "")
    _context.text = f" [job {job_id[:8]} #{attempt}]"
    try:
        yield
    finally:
        _context.text = previous


class JobContextFilter(logging.Filter):
    """Adds ``job_context`` to every record: the logging thread's job and attempt, or nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "job_context"):  # records from a slot's queue already carry theirs
            record.job_context = getattr(_context, "text", "")
        return True


def file_handler(path: str, max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> logging.Handler:
    """The rotating log file handler, formatted as every Millstream log line is."""
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(JobContextFilter())
    return handler


def configure(log_file: str | None, level: int = logging.INFO, max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> None:
    """Root logging of a JobManager or TaskManager process: the rotating file when one is given
    (``millstream cluster start`` gives one), else stderr. Replaces handlers set before."""
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    if log_file:
        handler = file_handler(log_file, max_bytes, backups)
    else:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(FORMAT))
        handler.addFilter(JobContextFilter())
    root.addHandler(handler)
    root.setLevel(level)


class _ContextQueueHandler(logging.handlers.QueueHandler):
    def prepare(self, record: logging.LogRecord) -> Any:
        # The slot (its process name) and its thread's job, before the record leaves the slot.
        record.job_context = f" {record.processName}{getattr(_context, 'text', '')}"
        return super().prepare(record)


class _PipeSender(logging.Handler):
    """Sends prepared records (message formatted, arguments dropped: picklable) to the TaskManager."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.conn = conn

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.conn.send(record)
        except (OSError, ValueError):
            pass  # the TaskManager is gone: the slot is about to die with it (nothing to log to)


def log_to_pipe(conn: Connection, level: int = logging.INFO) -> logging.handlers.QueueListener:
    """A slot process's root logging: every record to its TaskManager over ``conn`` (``forward``).
    The records it logged last are sent when the process exits."""
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    local: queue.SimpleQueue[Any] = queue.SimpleQueue()
    root.addHandler(_ContextQueueHandler(local))
    root.setLevel(level)
    sender = logging.handlers.QueueListener(local, _PipeSender(conn))
    sender.start()
    # multiprocessing ends its children with os._exit after running its finalizers, not atexit's.
    Finalize(None, sender.stop, exitpriority=10)
    return sender


def forward(conn: Connection, handlers: list[logging.Handler], name: str) -> threading.Thread:
    """Drain one slot's pipe into ``handlers`` (this process's own, taken before anything that ships
    lines elsewhere joined the root logger) until the slot's end closes."""
    def drain() -> None:
        while True:
            try:
                record = conn.recv()
            except (EOFError, OSError):
                break  # the slot exited (or was killed): its last lines are in
            except Exception:  # a record cut short by a SIGKILL mid-send: the pipe is done for
                break
            for h in handlers:
                if record.levelno >= h.level:
                    h.handle(record)
        conn.close()

    t = threading.Thread(target=drain, name=f"log-{name}", daemon=True)
    t.start()
    return t
