"""The TaskManager's CPU figure on real processes: forked children count, and children that come and go
never make an interval negative or hide the next one's work."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from millstream.engine.taskexecutor.process_tree_cpu import ProcessTreeCpu

# A stand-in for a TaskManager: on each command from stdin it burns CPU in a fork (as a heap snapshot
# forks), keeps the fork's own fork running after the fork dies (an orphan), or burns CPU itself.
ROOT = r"""
import os, signal, sys, time

def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    if cmd == "fork-burn":  # a child burns and ends; we reap it
        pid = os.fork()
        if pid == 0:
            burn(float(arg))
            os._exit(0)
        os.waitpid(pid, 0)
    elif cmd == "orphan-start":  # a child whose own child burns; arg: the grandchild's pid, for the test to end it
        r, w = os.pipe()
        child = os.fork()
        if child == 0:
            if os.fork() == 0:
                os.write(w, b"%d\n" % os.getpid())
                burn(3600)
                os._exit(0)
            time.sleep(3600)
        arg = os.read(r, 32).decode().strip()
    elif cmd == "orphan-cut":  # the child dies: its burning child leaves the tree, reparented elsewhere
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    elif cmd == "burn":
        burn(float(arg))
    print("ok", arg if cmd == "orphan-start" else "", flush=True)
"""


def _root() -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", ROOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _do(p: subprocess.Popen[str], cmd: str) -> str:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(cmd + "\n")
    p.stdin.flush()
    word, _, rest = p.stdout.readline().strip().partition(" ")
    assert word == "ok"
    return rest


def test_a_forked_child_that_ended_between_samples_is_counted() -> None:
    p = _root()
    try:
        tree = ProcessTreeCpu(p.pid)
        tree.sample()
        _do(p, "fork-burn 0.6")  # starts and ends between two samples: never seen alive
        cpu, wall = tree.sample()
        assert 0.5 <= cpu <= wall + 0.1, (cpu, wall)
    finally:
        p.kill()
        p.wait()


def test_an_orphaned_grandchild_leaving_the_tree_does_not_hide_the_next_intervals_work() -> None:
    p = _root()
    orphan = 0
    try:
        tree = ProcessTreeCpu(p.pid)
        tree.sample()
        orphan = int(_do(p, "orphan-start"))
        time.sleep(1.0)
        inside, _ = tree.sample()
        assert inside >= 0.1  # the grandchild burns inside the tree and is counted (a loaded host gives it less)
        _do(p, "orphan-cut")
        time.sleep(0.2)
        left, _ = tree.sample()
        assert left >= 0.0
        _do(p, "burn 0.4")
        after, wall = tree.sample()
        # The orphan took its time with it; that is no debt for the root's own work to pay off first
        # (which would leave 0.4 s minus what the orphan had burned inside the tree).
        assert 0.35 <= after <= wall + 0.1, (after, inside, wall)
    finally:
        p.kill()
        p.wait()
        if orphan:
            os.kill(orphan, signal.SIGKILL)
