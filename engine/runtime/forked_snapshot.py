"""Asynchronous snapshots of heap state in a forked child process (the copy-on-write view of issue 16).

Flink's heap backend snapshots from a copy-on-write view of its state tables so the task thread
pauses for a version bump, not for the state. In CPython a copy-on-write *map* would tax every state
access on the hot path, and serialising on a background thread would still hold the interpreter
lock against the task thread. ``fork()`` gives both for the price of copying the page tables: the
child is a frozen, copy-on-write image of the process at the barrier, in which the keyed state is
grouped by key group, pickled and written on another core; the task thread goes on at once, and
nothing it writes afterwards can leak into the snapshot.

The child only runs the ``materialise`` callable it is given and writes files; it never touches
locks another thread of the parent may have held at the fork (logging, Redis clients), and leaves
with ``os._exit`` so no parent clean-up runs twice. Its result comes back over a pipe as a pickle.
"""
from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

DEFAULT_TIMEOUT_S = 600.0  # Flink's default checkpoint timeout
_fork_lock = threading.Lock()  # one fork at a time, so no child inherits another snapshot's pipe


def available() -> bool:
    return hasattr(os, "fork")


@dataclass
class ForkedSnapshot:
    """A child process writing one snapshot; ``result()`` waits for it (call it off the task thread)."""

    pid: int
    read_fd: int

    @staticmethod
    def start(materialise: Callable[[], Any]) -> "ForkedSnapshot":
        """Fork; in the child run ``materialise()`` and send back its (picklable) result or error."""
        with _fork_lock:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: never returns
                _child(r, w, materialise)
            os.close(w)
        return ForkedSnapshot(pid, r)

    def result(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
        """The child's result; raises SnapshotFailed with its error, if it died without one, or if it
        took longer than ``timeout_s`` (then it is killed: a child can hang on a lock that another
        thread held at the fork, if user code in it logs or prints)."""
        chunks = []
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([self.read_fd], [], [], max(left, 0))  # waits without the GIL
                if not ready:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    raise SnapshotFailed(f"the snapshot process took longer than {timeout_s:.0f} s and was killed")
                chunk = os.read(self.read_fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(self.read_fd)
        _, status = os.waitpid(self.pid, 0)
        data = b"".join(chunks)
        if not data:
            raise SnapshotFailed(f"the snapshot process ended without a result ({_describe(status)})")
        ok, value = pickle.loads(data)
        if not ok:
            raise SnapshotFailed(value)
        return value


class SnapshotFailed(Exception):
    pass


def _child(r: int, w: int, materialise: Callable[[], Any]) -> None:
    code = 1
    try:
        os.close(r)
        for sig in (signal.SIGTERM, signal.SIGINT):  # the parent's handlers would shut the parent down
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (ValueError, OSError):
                pass
        try:
            payload = pickle.dumps((True, materialise()), protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the parent as text
            payload = pickle.dumps((False, f"{type(e).__name__}: {e}"))
        view = memoryview(payload)
        while view:
            view = view[os.write(w, view) :]
        os.close(w)
    finally:
        os._exit(code)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"
