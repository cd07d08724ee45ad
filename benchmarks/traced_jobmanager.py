"""A JobManager under tracemalloc, for ``jobmanager_memory_bench.py``: ``millstream jobmanager`` with
two signal hooks, so the benchmark can look inside the process between its jobs.

- SIGUSR1: collect garbage; note the resident set, SQLite's heap, pymalloc's arenas and (when tracing) the traced total; dump a
  tracemalloc snapshot to ``$JOBMANAGER_TRACE_DIR/snap-<n>.trace`` when tracing; then write the figures to
  ``snap-<n>.json`` (written last: the benchmark waits on it). ``$JOBMANAGER_TRACE_FRAMES=0``: no tracemalloc.
- SIGUSR2: ``malloc_trim(0)`` (glibc gives its free heap pages back), then ``trim-<n>.json`` with the
  resident set before and after: what RSS is held by the allocator rather than by live objects.

Usage (by the benchmark): ``python traced_jobmanager.py jobmanager --log-file ...`` with the cluster's env.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import itertools
import json
import os
import signal
import sys
import tempfile
import threading
import tracemalloc
from pathlib import Path

import psutil

#: tracebacks this deep; 0: no tracemalloc (RSS and SQLite figures only, the process as it runs normally)
FRAMES = int(os.environ.get("JOBMANAGER_TRACE_FRAMES", "12"))
OUT = Path(os.environ.get("JOBMANAGER_TRACE_DIR", "."))
_snaps = itertools.count()
_trims = itertools.count()


def _rss() -> int:
    return psutil.Process().memory_info().rss


def _sqlite_heap() -> int:
    """Bytes SQLite's own allocator holds in this process (page caches, statements): memory tracemalloc
    does not see. The library loaded by ``sqlite3`` is the one this handle reaches."""
    import sqlite3  # noqa: F401  (loads the library)

    name = ctypes.util.find_library("sqlite3")
    if name is None:
        return -1
    lib = ctypes.CDLL(name)
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return int(lib.sqlite3_memory_used())


def _pymalloc() -> dict[str, int]:
    """pymalloc's arenas (256 KiB each, returned to the OS only when wholly empty) and the bytes
    live objects use in them, from ``sys._debugmallocstats`` (which writes to the C stderr)."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode(errors="replace")
    figures = {}
    for line in text.splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "# bytes in allocated blocks":
            figures["pymalloc_used"] = int(value.strip().replace(",", ""))
        elif name.strip() == "Total" and "pymalloc" not in figures:  # the first Total: the arenas' bytes
            figures["pymalloc"] = int(value.strip().replace(",", ""))
    return figures


def _mappings() -> dict[str, int]:
    """Resident bytes of glibc's main heap (``[heap]``, the main thread's arena) and of anonymous
    mappings (pymalloc's arenas, other threads' malloc arenas, large blocks), from ``/proc/self/smaps``."""
    figures = {"heap": 0, "anon": 0}
    name = ""
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(maxsplit=6)
            if "-" in first[0] and len(first) >= 5 and ":" not in first[0]:
                name = first[5].strip() if len(first) > 5 else ""
            elif first[0] == "Rss:":
                if name == "[heap]":
                    figures["heap"] += int(first[1]) * 1024
                elif name == "":
                    figures["anon"] += int(first[1]) * 1024
    return figures


def _snapshot(signum: int, frame: object) -> None:
    n = next(_snaps)
    gc.collect()
    # before the snapshot, which costs memory itself
    figures = {"rss": _rss(), "sqlite": _sqlite_heap(), **_pymalloc(), **_mappings(), "threads": threading.active_count()}
    if tracemalloc.is_tracing():
        figures["traced"] = tracemalloc.get_traced_memory()[0]
        tracemalloc.take_snapshot().dump(str(OUT / f"snap-{n}.trace"))
    (OUT / f"snap-{n}.json").write_text(json.dumps(figures))


def _trim(signum: int, frame: object) -> None:
    n = next(_trims)
    gc.collect()
    before = _rss()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    (OUT / f"trim-{n}.json").write_text(json.dumps({"before": before, "after": _rss()}))


def main() -> None:
    if FRAMES:
        tracemalloc.start(FRAMES)
    signal.signal(signal.SIGUSR1, _snapshot)
    signal.signal(signal.SIGUSR2, _trim)
    from millstream.backend.cli import main as cli

    sys.argv = ["millstream", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
