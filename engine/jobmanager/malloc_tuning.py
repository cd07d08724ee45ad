"""glibc malloc settings for the long-lived JobManager process, so its memory does not creep with
every job it runs.

glibc serves a block of at least ``M_MMAP_THRESHOLD`` bytes (128 KiB at start) with its own ``mmap``,
returned to the OS on free; but each time such a block is freed it raises the threshold to that
block's size (up to 32 MiB). After the first job, the JobManager's large transient blocks (a
submitted JobGraph and its user code, SQL rows and Redis replies of a few hundred KiB) are carved
from the threads' malloc arenas instead, and the arenas fragment: benchmarks/jobmanager_memory_bench.py
measured the growth in those arenas (anonymous mappings), not in Python objects, pymalloc or SQLite,
and ``malloc_trim`` gave almost nothing back. Pinning the threshold (which also turns the dynamic
adjustment off) keeps large blocks in their own mappings. See docs/performance.md, "JobManager
memory per job".
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("millstream.jobmanager")

#: mallopt's parameter number for the mmap threshold (glibc's malloc.h)
M_MMAP_THRESHOLD = -3
#: glibc's initial threshold, kept fixed
MMAP_THRESHOLD_BYTES = 128 * 1024


def pin_mmap_threshold(nbytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold at ``nbytes``; False (and nothing changed) where the C library is
    not glibc (musl, macOS) or refuses."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        # gnu_get_libc_version exists only in glibc: another libc's mallopt may mean something else.
        libc.gnu_get_libc_version
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    done = mallopt(M_MMAP_THRESHOLD, nbytes) == 1
    if not done:
        log.warning("glibc refused mallopt(M_MMAP_THRESHOLD, %d)", nbytes)
    return done
