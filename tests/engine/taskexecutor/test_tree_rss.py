"""The TaskManager's resident-memory figure covers its whole process tree, grandchildren included."""
from __future__ import annotations

import subprocess
import sys
import time

from millstream.engine.taskexecutor.task_executor import TaskExecutor


def test_tree_rss_counts_a_grandchild_holding_memory():
    before = TaskExecutor._tree_rss()
    # A child that starts a grandchild (as a slot process forks a snapshot writer) which holds 200 MB.
    grandchild = "import time; b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096]); print('ready', flush=True); time.sleep(60)"
    child = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {grandchild!r}]); p.wait()"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(0.1)
        grown = TaskExecutor._tree_rss() - before
        assert grown >= 180 << 20, f"the tree grew by {grown >> 20} MiB only"
    finally:
        import psutil

        for p in psutil.Process(child.pid).children(recursive=True):
            p.kill()
        child.kill()
        child.wait()
