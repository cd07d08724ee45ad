"""Stack sampling of task threads for flame graphs (Flink's ThreadInfoSampleService, FLIP-165).

A slot asked for samples of a vertex's subtasks reads the Python stack of each subtask's task thread
(``sys._current_frames()``) ``num_samples`` times, ``delay_s`` apart on average, and answers with the distinct
stacks and how often each was seen, each stack marked on-CPU or off-CPU.

On-CPU or off-CPU (Flink asks the JVM for the thread's state; Python has none): a sample is **off-CPU**
when the innermost Python frame is waiting, decided by that frame alone:

* its function is a known wait point (``OFF_CPU_FUNCTIONS``: ``threading``'s ``wait``, a lock's
  ``acquire``, ``select``/``poll`` of the selectors, redis-py's socket reads...), or
* the source line it is executing calls a blocking primitive (``BLOCKING_CALL``: ``sleep(``,
  ``wait(``, ``blpop(``, ``recv_into(``, ...). Sampled frames are Python frames, so a task blocked in
  ``time.sleep`` or a socket read shows as the Python frame that made that call, on that line.

Everything else is on-CPU: a user function that computes shows by name in the on-CPU graph. The rule
can be fooled by a line that both computes and calls ``sleep(``; it never needs the thread's CPU clock.

The interpreter lock biases in-process sampling: the sampling thread runs only when the task thread
lets go of the lock, which a short burst of computation never does before the switch interval runs
out (CPython's 5 ms; a slot process runs with 1 ms), so shorter bursts would never be seen (measured
at 5 ms: 0 of 100 samples inside a 1 ms burst repeated every 11 ms). While a sampling runs, the
process's switch interval is lowered to ``SAMPLING_SWITCH_INTERVAL_S`` so the sampler gets in within a
tenth of a millisecond on a machine with a core to spare, and restored after.

When a sample is taken matters as much. Sampling every ``delay`` exactly aliases with work that
repeats on a period of its own: a paced source's records arrive every 10 ms, samples every 20 ms,
and each sample sees the next cycle at the phase of the one before, moved on only by how much the
sleep overran. A hundred samples then cover as much of the cycle as the overruns add up to, and a
2 ms burst per record is over- or under-counted depending on where the two clocks started (on a
simulated clock with exact sleeps: in all 400 samples or in none, tests/engine/taskexecutor).
Sample i is therefore taken at a uniformly random moment of its own slot ``[start + i*delay, start + (i+1)*delay)``
(stratified sampling): every moment of the run is equally likely to be sampled, whatever the
period of the work, and the sampling still ends after ``num_samples * delay`` as the JobManager's
deadline expects.

What the lowered switch interval cannot remove: when the machine is overloaded (more runnable
threads than cores), the sampler itself waits to be scheduled by the OS before it can take the lock
from a computing thread, and a burst that ends in that wait is seen as the wait that follows it
(measured at load average 11 on 2 cores: the sampler's median lateness 1-4 ms behind a computing
thread, against 0.1 ms behind a waiting one). docs/performance.md gives the shares measured.

A stack may now and then be cut short at the root end: CPython 3.11 shows a generator's frame, read
from another thread just as it is entered, without its callers.

Pure apart from reading frames, which is passed in (``current_frames``) so tests can feed it.
"""
from __future__ import annotations

import linecache
import random
import re
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from types import FrameType
from typing import Any, Callable, Iterable, Iterator

#: Functions whose frame, when innermost, means the thread waits (off-CPU).
OFF_CPU_FUNCTIONS = frozenset({
    "wait", "wait_for", "_wait_for_tstate_lock", "acquire", "select", "poll", "sleep", "join",
    "_read_from_socket", "read_response", "can_read", "can_read_destructive", "recv", "recv_into", "readline",
})
#: A line that calls one of these is waiting while the frame is innermost.
BLOCKING_CALL = re.compile(r"\b(sleep|wait|wait_for|blpop|brpop|brpoplpush|blmove|select|poll|recv|recv_into|accept|acquire|join)\s*\(")
#: The interpreter's switch interval while sampling (see the module docstring).
SAMPLING_SWITCH_INTERVAL_S = 0.0001
_switch_lock = threading.Lock()
_samplers = 0  # samplings running now; the last to end restores the interval
_saved_interval = 0.005
#: Deeper stacks are cut at the root end (the task thread's own entry frames), as Flink caps depth.
MAX_DEPTH = 256

Stack = tuple[str, ...]


def frame_name(frame: FrameType) -> str:
    """``module.qualified_name:line``: Flink's ``class.method:line`` for a Python frame."""
    code = frame.f_code
    module = frame.f_globals.get("__name__", "?")
    return f"{module}.{getattr(code, 'co_qualname', code.co_name)}:{frame.f_lineno}"


def is_off_cpu(function: str, line: str) -> bool:
    """The rule in the module docstring: ``function`` is the innermost frame's, ``line`` its current source line."""
    return function in OFF_CPU_FUNCTIONS or BLOCKING_CALL.search(line) is not None


def stack_of(frame: FrameType, max_depth: int = MAX_DEPTH) -> tuple[Stack, bool]:
    """The stack from the thread's root to ``frame`` (innermost last) and whether it is off-CPU."""
    code = frame.f_code
    off = is_off_cpu(code.co_name, linecache.getline(code.co_filename, frame.f_lineno))
    names: list[str] = []
    f: FrameType | None = frame
    while f is not None and len(names) < max_depth:
        names.append(frame_name(f))
        f = f.f_back
    names.reverse()
    return tuple(names), off


@contextmanager
def fine_switching(interval_s: float | None) -> Iterator[None]:
    """The interpreter switches threads every ``interval_s`` meanwhile (None: left alone)."""
    global _samplers, _saved_interval
    if interval_s is None:
        yield
        return
    with _switch_lock:
        if _samplers == 0:
            _saved_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(interval_s, _saved_interval))
        _samplers += 1
    try:
        yield
    finally:
        with _switch_lock:
            _samplers -= 1
            if _samplers == 0:
                sys.setswitchinterval(_saved_interval)


def sample_threads(
    thread_ids: Iterable[int],
    num_samples: int,
    delay_s: float,
    current_frames: Callable[[], dict[int, FrameType]] = sys._current_frames,
    sleep: Callable[[float], None] = time.sleep,
    should_stop: Callable[[], bool] = lambda: False,
    switch_interval_s: float | None = SAMPLING_SWITCH_INTERVAL_S,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> list[list[Any]]:
    """``[[stack, count, off_cpu], ...]`` over every sample of every thread in ``thread_ids`` still
    alive, msgpack-ready. Sample i is taken at a random moment of ``[i*delay_s, (i+1)*delay_s)`` after
    the start (the module docstring says why). Stops early when ``should_stop()`` (the slot is
    shutting down)."""
    wanted = set(thread_ids)
    counts: Counter[tuple[Stack, bool]] = Counter()
    draw = (rng or random.Random()).random
    with fine_switching(switch_interval_s):
        start = clock()
        for i in range(max(num_samples, 0)):
            if should_stop():
                break
            wait = start + (i + draw()) * delay_s - clock()
            if wait > 0:
                sleep(wait)
            frames = current_frames()
            for tid in wanted:
                frame = frames.get(tid)
                if frame is not None:
                    counts[stack_of(frame)] += 1
            del frames  # frames keep their threads' locals alive
    return [[list(stack), n, off] for (stack, off), n in counts.items()]
