"""A TaskManager SIGKILLed while its slot processes are still starting leaves no slot behind.

A slot asks the kernel to kill it when its TaskManager dies (PR_SET_PDEATHSIG), but only after the
interpreter has started and imported the runtime, up to a second after the TaskManager spawned it.
A TaskManager killed in that second left its slots running under init for good (found after a CI
run: an idle slot of a test that kills TaskManagers, an hour later). Real processes, a real SIGKILL.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil

from tests.integration.cluster import Cluster


def _slots_of(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return []
    out = []
    for c in children:
        try:
            if "spawn_main" in " ".join(c.cmdline()):
                out.append(c)
        except psutil.NoSuchProcess:
            pass
    return out


def test_slots_of_a_taskmanager_killed_while_they_start_exit(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    try:
        for _ in range(2):  # the race is won twice, not once by luck
            tm = cluster.start_taskmanager(slots=2)
            deadline = time.time() + 60
            slots: list[psutil.Process] = []
            while time.time() < deadline and len(slots) < 2:
                slots = _slots_of(tm.pid)
                time.sleep(0.005)
            assert len(slots) == 2, "the TaskManager started no slot processes"
            os.kill(tm.pid, signal.SIGKILL)  # the slots are still importing the runtime
            tm.wait(10)
            gone, alive = psutil.wait_procs(slots, timeout=30)
            assert not alive, f"slot processes outlived their SIGKILLed TaskManager: {[p.pid for p in alive]}"
    finally:
        cluster.stop()
