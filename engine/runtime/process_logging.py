"""How Millstream's processes log: Flink's ``.log`` and ``.out`` split, rotation, and job context.

As in Flink, each JobManager and TaskManager has a log file (``<name>.log``, rotated by size) and a
separate stdout file (``<name>.out``) that receives what user code prints. A TaskManager's slot
processes do not write the log file themselves: several writers of one rotating file would rotate
under each other, so they put their records on a queue that the TaskManager process drains into its
handler (the logging cookbook's QueueHandler / QueueListener pair).

Every line logged on a task's thread names the job and attempt (``[job 1a2b3c4d #2]``): the task
thread sets its context with ``task_log_context`` and a filter adds it to each record, so lines of a
TaskManager running several jobs can be told apart.
"""
from __future__ import annotations

import contextlib
import logging
import logging.handlers
import threading
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


def log_to_queue(queue: Any, level: int = logging.INFO) -> None:
    """A slot process's root logging: every record to the TaskManager's queue (``listen``)."""
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(_ContextQueueHandler(queue))
    root.setLevel(level)


def listen(queue: Any) -> logging.handlers.QueueListener:
    """Drain the slots' queue into this process's own handlers (started; ``stop()`` it at exit)."""
    listener = logging.handlers.QueueListener(queue, *logging.getLogger().handlers, respect_handler_level=True)
    listener.start()
    return listener
