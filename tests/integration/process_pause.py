"""Pausing a JobManager (SIGSTOP) at a moment a standby can take over from it.

With SQLite, a JobManager stopped inside a write transaction holds the database's write lock until it
wakes or dies, so no standby can raise the leader fence (or write anything) meanwhile: the failover
waits for the frozen process, as documented in the README's fault table. That is SQLite's limit, not
the fencing under test, so the HA tests pause the leader outside a write: after each SIGSTOP they look
up who holds the WAL write lock in ``/proc/locks`` and, if the stopped process does, wake it and try
again a moment later.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

# SQLite's WAL mode takes its write lock as a POSIX lock on byte 120 of the ``-shm`` file
# (WALINDEX_LOCK_OFFSET + WAL_WRITE_LOCK in SQLite's wal.c).
_WAL_WRITE_LOCK_BYTE = 120


def is_stopped(pid: int) -> bool:
    """Whether the process is in the stopped state (``T`` in /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


def holds_sqlite_write_lock(pid: int, database: Path) -> bool:
    """Whether ``pid`` holds the WAL write lock of the SQLite database file ``database``."""
    shm = Path(f"{database}-shm")
    try:
        inode = shm.stat().st_ino
    except FileNotFoundError:
        return False
    for line in Path("/proc/locks").read_text().splitlines():
        # "3: POSIX  ADVISORY  WRITE 662 fd:01:1234567 120 120"; waiters are listed as "3: -> POSIX ..."
        parts = line.split()
        if "->" in parts or len(parts) < 8 or parts[1] != "POSIX":
            continue
        holder, file_id, start, end = parts[4], parts[5], parts[6], parts[7]
        if int(holder) != pid or int(file_id.rsplit(":", 1)[1]) != inode:
            continue
        last = _WAL_WRITE_LOCK_BYTE if end == "EOF" else int(end)
        if int(start) <= _WAL_WRITE_LOCK_BYTE <= last:
            return True
    return False


def pause_outside_sqlite_write(pid: int, database: Path, attempts: int = 100) -> int:
    """SIGSTOP ``pid`` at a moment it holds no SQLite write lock; how many tries that took."""
    for attempt in range(1, attempts + 1):
        os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while not is_stopped(pid):  # the signal is delivered asynchronously
            if time.monotonic() > deadline:
                raise AssertionError(f"process {pid} did not stop")
            time.sleep(0.005)
        if not holds_sqlite_write_lock(pid, database):
            return attempt
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError(f"process {pid} held the database's write lock at each of {attempts} pauses")
