"""CPU time of a process tree between two samples: a TaskManager, its slot processes, and whatever
they fork (a heap snapshot forks a child), as Flink's ``Status.ProcessTree`` figures count the tree.

A process's figure is its own CPU time plus ``children_user``/``children_system``: the time of the
children it has reaped. So the tree's total is continuous while children come and go: a child that
ends moves its time from its own entry into its parent's ``children_*`` fields, and a child that lived
and ended between two samples still shows up there.

The total is not summed afresh each time, which would jump when a process leaves the tree without a
parent in it to reap it (a grandchild orphaned by a slot that died): instead each sample adds, per
process, what moved since the last sample. A process that left is taken off (its time reappears in
its parent's ``children_*``) only if that parent is still in the tree; otherwise its time is kept as
counted. Reads race with processes ending, so an interval can come out short and the next long; a
shortfall is carried into the next interval instead of being reported as a negative figure.
"""
from __future__ import annotations

import os
import time

import psutil

#: (pid, create time): a pid reused by a new process is another process.
_Key = tuple[int, float]


class ProcessTreeCpu:
    def __init__(self, root_pid: int | None = None) -> None:
        self._root = psutil.Process(root_pid if root_pid is not None else os.getpid())
        self._seen: dict[_Key, tuple[int, float]] | None = None  # key -> (parent pid, CPU seconds incl. reaped children)
        self._debt = 0.0  # a shortfall not yet made good, in CPU seconds (<= 0)
        self._at = time.monotonic()

    def _read(self) -> dict[_Key, tuple[int, float]]:
        out: dict[_Key, tuple[int, float]] = {}
        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return out
        for p in procs:
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    out[(p.pid, p.create_time())] = (p.ppid(), t.user + t.system + t.children_user + t.children_system)
            except psutil.Error:  # ended since it was listed: its time is counted where it went
                continue
        return out

    def sample(self) -> tuple[float, float]:
        """``(CPU seconds of the tree, wall seconds)`` since the previous call (the first call only
        starts the measurement and returns zeros). The CPU figure is never negative."""
        now = self._read()
        at = time.monotonic()
        wall, self._at = at - self._at, at
        if self._seen is None:
            self._seen = now
            return 0.0, 0.0
        live_pids = {pid for pid, _ in now}
        moved = self._debt
        for key, (_, cpu) in now.items():
            before = self._seen.get(key)
            moved += cpu - (before[1] if before is not None else 0.0)  # a new process: all of its time is new
        for key, (parent, cpu) in self._seen.items():
            if key not in now and parent in live_pids:
                moved -= cpu  # its time is in the parent's children_* now (or will be once reaped)
        self._seen = now
        self._debt = min(moved, 0.0)
        return max(moved, 0.0), wall

    def load(self, cores: int | None = None) -> float:
        """The tree's CPU since the previous call as a share of the host's cores, 0..1."""
        cpu, wall = self.sample()
        if wall <= 0:
            return 0.0
        return min(1.0, cpu / wall / (cores or psutil.cpu_count() or 1))
