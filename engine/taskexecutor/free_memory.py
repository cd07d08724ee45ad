"""Freeing what ended jobs left behind when a slot falls idle.

A slot process runs job after job. Each job's user code is full of reference cycles (cloudpickled
functions and classes), so only the cyclic collector frees it, and Python runs its oldest generation
only once the long-lived objects have grown by a quarter: meanwhile the ended jobs stay in memory, and
the slot's resident memory crept up ~90 KB per job (docs/performance.md, "The soak again"). When the
slot has no task left, a full collection frees them and ``malloc_trim(0)`` hands the heap's wholly
free pages back to the system (glibc; elsewhere nothing). On one slot, from the 20th to the 100th short
job: 61.3 -> 67.1 MiB with the trim alone, 59.1 -> 59.3 MiB with the collection first. A deploy
arriving meanwhile waits the collection's few milliseconds; a running task never does.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc


@functools.cache
def _malloc_trim():  # type: ignore[no-untyped-def]
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Collect the ended jobs' garbage and return the heap's free pages to the system; whether
    anything was released."""
    gc.collect()  # the ended jobs' cycles (see the module's docstring)
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
