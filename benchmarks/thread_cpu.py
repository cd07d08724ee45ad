"""CPU seconds per thread of a local cluster's processes, while a benchmark runs beside it.

``python benchmarks/thread_cpu.py OUT.json`` samples every thread of the cluster's processes (slot
processes, TaskManagers, the JobManager, Redis) once a second from ``/proc/<pid>/task/<tid>/stat``
until it is stopped (SIGINT or SIGTERM), then writes each thread's samples to OUT.json.
``python benchmarks/thread_cpu.py --report OUT.json [T0 T1]`` prints the CPU seconds per process
role and thread name (between the epoch seconds T0 and T1, or over the whole recording).

Python 3.11 gives its threads no OS names (``top -H`` shows only "python"), so the threads are named
from ``py-spy dump`` every few seconds when py-spy is on the PATH or in ``PY_SPY``; without it they
are listed by id. A task's threads live as long as its job, so a thread's name and the times it was
seen tell which job it served (issue 16, docs/large-state.md change 30).
"""
from __future__ import annotations

import bisect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

_HZ = os.sysconf("SC_CLK_TCK")
_NAME_EVERY = 4  # samples between two py-spy dumps (each pauses nothing: --nonblocking)
_THREAD = re.compile(r'Thread (\d+) \(\w+\): "([^"]*)"')


def _role(cmd: str) -> str | None:
    if "spawn_main" in cmd:
        return "slot"
    if "valkey" in cmd or "redis-server" in cmd:
        return "redis"
    for role in ("jobmanager", "taskmanager"):
        if role in cmd:
            return role
    return None


def _processes(me: int) -> dict[int, str]:
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == me:
            continue
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        role = _role(cmd)
        if role is not None and "thread_cpu" not in cmd:
            out[int(p)] = role
    return out


def _ticks(pid: int, tid: str) -> int | None:
    try:
        stat = open(f"/proc/{pid}/task/{tid}/stat").read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _names(pyspy: str, pid: int) -> dict[int, str]:
    try:
        dump = subprocess.run([pyspy, "dump", "--nonblocking", "-p", str(pid)], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {int(m.group(1)): m.group(2) for m in _THREAD.finditer(dump)}


def record(out: str) -> None:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    pyspy = os.environ.get("PY_SPY") or shutil.which("py-spy")
    series: dict[tuple[int, int], list[tuple[float, int]]] = {}
    names: dict[tuple[int, int], str] = {}
    roles: dict[int, str] = {}
    n = 0
    while not stop:
        now = round(time.time(), 2)
        procs = _processes(os.getpid())
        for pid, role in procs.items():
            roles[pid] = role
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                ticks = _ticks(pid, tid)
                if ticks is not None:
                    series.setdefault((pid, int(tid)), []).append((now, ticks))
            if pyspy and n % _NAME_EVERY == 0 and role != "redis":
                names.update({(pid, tid): name for tid, name in _names(pyspy, pid).items()})
        n += 1
        time.sleep(1)
    rows = [
        {"pid": pid, "tid": tid, "role": roles.get(pid), "name": names.get((pid, tid), "main" if pid == tid else f"thread {tid}"), "series": s}
        for (pid, tid), s in series.items()
    ]
    with open(out, "w") as f:
        json.dump(rows, f)


def _at(series: list[list[float]], t: float) -> float:
    i = bisect.bisect_right([s[0] for s in series], t) - 1
    return 0.0 if i < 0 else series[i][1]


def report(path: str, t0: float | None = None, t1: float | None = None) -> list[str]:
    rows: list[dict[str, Any]] = json.load(open(path))
    totals: dict[str, float] = {}
    for r in rows:
        s = r["series"]
        lo = s[0][0] if t0 is None else t0
        hi = s[-1][0] if t1 is None else t1
        if s[0][0] < lo:
            start = _at(s, lo)
        elif r["tid"] != r["pid"]:
            start = 0.0  # a thread first seen inside the window was born there: its CPU counts from 0
        else:
            start = s[0][1]  # a process's main thread, first seen here: what it spent before is unknown
        spent = (_at(s, hi) - start) / _HZ
        if spent > 0:
            key = f"{r['role']} | {re.sub(r'[0-9]+', '#', r['name'])}"
            totals[key] = totals.get(key, 0.0) + spent
    lines = [f"{v:8.1f} s  {k}" for k, v in sorted(totals.items(), key=lambda kv: -kv[1]) if v >= 0.1]
    return lines + [f"{sum(totals.values()):8.1f} s  in all"]


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "--report":
        window = [float(x) for x in sys.argv[3:5]]
        print("\n".join(report(sys.argv[2], *window)))
    elif len(sys.argv) == 2:
        record(sys.argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
