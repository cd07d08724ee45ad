"""Keep a long-running process's secrets from the programs it starts (issue 14, hole 4).

The JobManager runs uploaded programs to plan them, and a TaskManager's slots run user code. Those
children get a clean environment, but a child running as the same user could still read what its
ancestors hold: ``/proc/<pid>/environ`` (the environment the ancestor was started with, whatever it
removed from ``os.environ`` since) and ``/proc/<pid>/mem`` (everything, secrets included).

Two measures, both at start, once the settings have been read:

* :func:`make_undumpable`: ``prctl(PR_SET_DUMPABLE, 0)``. The kernel then refuses ptrace access to
  this process from anything without ``CAP_SYS_PTRACE``: ``/proc/<pid>/mem`` cannot be opened by
  same-user processes, and ``/proc/<pid>/environ`` (and other per-process files) become owned by
  root, so a non-root same-user child cannot read them either. It also means no core dumps. The flag
  is reset by ``execve``, so a process that re-executes itself must call this after the last exec.
* :func:`scrub_environment`: removes the named variables from ``os.environ`` (so nothing started
  later inherits them by accident) and overwrites their bytes in the environment block the process
  was started with, which is what ``/proc/<pid>/environ`` shows. That block is the only place
  ``/proc`` reads; a reader that bypasses the dumpable check (root with ``CAP_SYS_PTRACE``, or root
  in a container, which the dumpable flag does not stop from reading ``environ``) sees NUL bytes.

Neither helps against code running *inside* a process that holds a secret (a slot process, which
must seal what it sends): that code can read the process's own memory.
"""
from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Iterable

log = logging.getLogger("millstream.security")

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3

#: What the JobManager, the TaskManagers and the launcher read from the environment that grants
#: access to something: the cluster secret, the REST token, the database and the Redis servers
#: (their URLs carry passwords).
SECRET_VARIABLES: tuple[str, ...] = (
    "MILLSTREAM_CLUSTER_SECRET",
    "MILLSTREAM_AUTH_TOKEN",
    "DATABASE_URL",
    "MILLSTREAM_DATABASE_URL",
    "REDIS_URL",
    "MILLSTREAM_REDIS_URL",
    "MILLSTREAM_DATA_REDIS_URLS",
)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def make_undumpable() -> bool:
    """Mark this process non-dumpable (Linux); False where that is not possible (other systems)."""
    libc = _libc()
    if libc is None:
        return False
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        log.warning("prctl(PR_SET_DUMPABLE, 0) failed: %s", os.strerror(err))
        return False
    return True


def is_dumpable() -> bool | None:
    """This process's dumpable flag (None where it cannot be read)."""
    libc = _libc()
    if libc is None:
        return None
    return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0


def scrub_environment(names: Iterable[str] = SECRET_VARIABLES) -> dict[str, str]:
    """Remove ``names`` from ``os.environ`` and blank them in the initial environment block.
    Returns what was removed (a launcher passes it on to the processes it starts explicitly)."""
    wanted = set(names)
    removed = {k: os.environ.pop(k) for k in list(os.environ) if k in wanted}
    if removed:
        _blank_initial_block(wanted)
    return removed


def _blank_initial_block(names: set[str]) -> None:
    """Overwrite ``NAME=value`` of ``names`` in the block ``/proc/self/environ`` reads (Linux only).

    Safe because ``os.environ.pop`` has already unset them: libc's ``environ`` array no longer points
    at those strings, and every other entry is left where it is. The block is checked against
    ``/proc/self/environ`` first, so a kernel that laid it out otherwise is left alone."""
    if not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/stat", "rb") as f:
            # Fields after the command name (which may contain spaces) start at field 3 (state);
            # env_start and env_end are fields 50 and 51 (proc(5)).
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[50 - 3]), int(fields[51 - 3])
        with open("/proc/self/environ", "rb") as f:
            expected = f.read()
    except (OSError, IndexError, ValueError) as e:
        log.warning("could not locate the initial environment block: %s", e)
        return
    if not start or end <= start or end - start != len(expected):
        log.warning("the initial environment block is not where /proc/self/stat says; left as it is")
        return
    block = (ctypes.c_char * (end - start)).from_address(start)
    if bytes(block) != expected:
        log.warning("the initial environment block differs from /proc/self/environ; left as it is")
        return
    offset = 0
    for entry in expected.split(b"\0"):
        name = entry.split(b"=", 1)[0].decode("utf-8", "replace")
        if name in names and entry:
            ctypes.memset(start + offset, 0, len(entry))
        offset += len(entry) + 1


def harden_process(names: Iterable[str] = SECRET_VARIABLES) -> dict[str, str]:
    """Both measures: called by the JobManager, the TaskManagers and the launcher once their settings
    are read. Returns the variables removed from the environment."""
    # Scrub first: once non-dumpable, /proc/self/environ belongs to root, so a process that is not
    # root (the container image's USER) could no longer read it to find the block to blank.
    removed = scrub_environment(names)
    make_undumpable()
    return removed
