"""Waiting on progress, not on a clock, in tests that check that something did NOT happen.

A fixed sleep proves nothing on a loaded machine: the task may simply not have run yet. These
helpers wait until the task demonstrably had the chance (it spent more time idle in its loop) or
until the awaited change shows, with a generous deadline for the failure case only.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable


def idled(tasks: Iterable, seconds: float = 0.2, timeout: float = 30.0) -> None:
    """Until every task has spent ``seconds`` more idle in its loop (a source holding back at its
    stop, a task polling inputs that bring nothing): each had the chance to go on and did not."""
    tasks = list(tasks)
    start = {id(t): t.metrics.idle_s for t in tasks}
    deadline = time.monotonic() + timeout
    while any(t.metrics.idle_s - start[id(t)] < seconds for t in tasks):
        assert time.monotonic() < deadline, "a task never went idle"
        time.sleep(0.01)


def until(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Until ``predicate()`` holds; fails naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        time.sleep(0.01)
