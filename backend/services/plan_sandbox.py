"""The plan sandbox: runs one command and leaves no process of it behind.

``python -m millstream.backend.services.plan_sandbox --timeout S -- cmd ...`` makes itself a
child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``), so every process the command
forks, even one that double-forks and calls ``setsid`` to detach, is re-parented
here rather than to init when its parent exits. When the command exits or its
time is up, the sandbox kills every descendant it still has, reaps them, and
exits with the command's status (124 on a timeout, as timeout(1) does).
The program runner (program_runner.py) starts it in its own session, so the
JobManager can still kill the whole sandbox if the sandbox itself hangs.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
TIMED_OUT = 124


def become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (read from /proc, so it also sees orphans
    re-parented to this subreaper)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        fields = stat[stat.rfind(b")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != b"Z":
            found.append(int(entry))
    return found


def reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_descendants(deadline_s: float = 10.0) -> None:
    """SIGKILL every child until none is left: killing one re-parents its own children here."""
    me = os.getpid()
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        reap_all()
        kids = children_of(me)
        if not kids:
            return
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="plan_sandbox")
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    become_subreaper()
    proc = subprocess.Popen(command, start_new_session=True)
    try:
        status = proc.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        status = TIMED_OUT
    finally:
        kill_descendants()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
