"""An idle slot frees the jobs that ended: their user code sits in reference cycles that only a full
collection frees, which Python's own schedule left for many jobs (the slot's memory crept up ~90 KB
per job in the soak)."""
from __future__ import annotations

import gc
import subprocess
import sys
import weakref

from millstream.engine.runtime.user_code_class_loader import load_user_code
from millstream.engine.taskexecutor.free_memory import release_free_memory

PROGRAM = """
import sys, cloudpickle
class Reading:
    pass
class Graph:
    pass
g = Graph()
g.make = lambda: Reading()
sys.stdout.buffer.write(cloudpickle.dumps(g))
"""


def test_an_ended_jobs_user_code_in_cycles_is_freed_when_the_slot_falls_idle() -> None:
    code = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, check=True).stdout
    gc.collect()
    gc.disable()  # Python's own schedule may not collect for many jobs: here, not at all
    try:
        graph = load_user_code(code)
        graph.itself = graph  # the cycles cloudpickled code has
        loader = weakref.ref(graph.class_loader)
        del graph
        assert loader() is not None  # garbage, but still in memory
        release_free_memory()
        assert loader() is None
    finally:
        gc.enable()
