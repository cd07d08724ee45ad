"""The JobManager's own process figures under the Flink names a Python process can honestly fill:
Flink's JobManager reports its JVM's CPU load and time, threads and memory; here the CPU is this
process's (as a share of the host's cores, as Flink's ``Status.JVM.CPU.Load``), the memory the
resident set of the process tree (the JobManager and the Spark drivers it started), as
``Status.ProcessTree.Memory.RSS``. There is no JVM heap to report, so no ``Memory.Heap`` figure.

The load is measured between two reads (a Prometheus scrape, a REST call), at least
``MIN_INTERVAL_S`` apart; the first read gives the average since the process started.
"""
from __future__ import annotations

import os
import threading
import time

import psutil

MIN_INTERVAL_S = 1.0


class ProcessSampler:
    def __init__(self, pid: int | None = None) -> None:
        self._proc = psutil.Process(pid or os.getpid())
        self._lock = threading.Lock()
        self._last: tuple[float, float] | None = None  # (wall clock, CPU seconds) of the last measurement
        self._load = 0.0

    def _cpu_seconds(self) -> float:
        t = self._proc.cpu_times()
        return t.user + t.system

    def cpu_load(self) -> float:
        """This process's CPU use since the previous measurement, as a share of all the host's cores."""
        cores = psutil.cpu_count() or 1
        with self._lock:
            now, cpu = time.time(), self._cpu_seconds()
            if self._last is None:
                since = max(now - self._proc.create_time(), 1e-3)
                self._load = cpu / since / cores
                self._last = (now, cpu)
            elif now - self._last[0] >= MIN_INTERVAL_S:
                self._load = (cpu - self._last[1]) / (now - self._last[0]) / cores
                self._last = (now, cpu)
            return min(max(self._load, 0.0), 1.0)

    def values(self) -> dict[str, float]:
        """Flink's names -> this process's figures."""
        rss = self._proc.memory_info().rss
        for child in self._proc.children(recursive=True):
            try:
                rss += child.memory_info().rss
            except psutil.Error:
                pass  # it ended between the listing and the read
        return {
            "Status.JVM.CPU.Load": self.cpu_load(),
            "Status.JVM.CPU.Time": int(self._cpu_seconds() * 1e9),  # ns, as Flink's
            "Status.JVM.Threads.Count": threading.active_count(),
            "Status.ProcessTree.Memory.RSS": rss,
            "System.Memory.Available": psutil.virtual_memory().available,
        }


_sampler: ProcessSampler | None = None


def jobmanager_process_values() -> dict[str, float]:
    """The figures of the process this runs in (the JobManager's)."""
    global _sampler
    if _sampler is None:
        _sampler = ProcessSampler()
    return _sampler.values()
