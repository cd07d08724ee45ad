"""StateUploader: a checkpoint's uploads of shared state files at a URL, several at a time (Flink's
``RocksDBStateUploader``, sized by the same option as the downloader, ``TRANSFER_THREADS``).

A snapshot's writer builds its new files one after another (a rolled snapshot's delta and partial
base, a merging one's merged file and delta). Locally a file is written and synced as it is built. At
a URL each file was then uploaded before the next was built, and an upload waits for its round trips
(the object's PUT, then the copy and delete that move it into place) while the writer could have
been building the next file. So a file at a URL is spooled to local disk as it is built (its bytes
and index are known at once) and its upload is handed to a few threads; the snapshot waits for all
of its uploads before it returns (``Uploads.wait``), so a checkpoint is never acknowledged with one
of its files still on its way, and a failed upload fails the checkpoint as a failed write does.

The threads are per process and number of threads (a slot's tasks share them); the uploads of one
snapshot are an ``Uploads`` group.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Callable

Upload = Callable[[], None]

_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(threads: int) -> ThreadPoolExecutor:
    with _pools_lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = ThreadPoolExecutor(threads, thread_name_prefix="state-upload")
        return pool


def _after_fork_in_child() -> None:
    # A forked snapshot child has none of its parent's threads (and writes locally, never at a URL).
    global _pools_lock
    _pools_lock = threading.Lock()
    _pools.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


class Uploads:
    """The uploads of one snapshot. ``submit`` hands one over (with one thread: runs it here, as
    before there were several); ``wait`` returns once every one has ended and raises the first
    error among them."""

    def __init__(self, threads: int) -> None:
        self._threads = max(1, int(threads))
        self._futures: list[Future[None]] = []

    def submit(self, upload: Upload) -> None:
        if self._threads == 1:
            upload()
            return
        self._futures.append(_pool(self._threads).submit(upload))

    def wait(self) -> None:
        futures, self._futures = self._futures, []
        # All of them, even after a failure: an upload left running could land a file after the
        # checkpoint was declined and the task went on to the next one.
        wait(futures)
        for f in futures:
            error = f.exception()
            if error is not None:
                raise error

    @property
    def pending(self) -> int:
        """Uploads handed over and not yet ended."""
        return sum(1 for f in self._futures if not f.done())
