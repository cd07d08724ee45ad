"""The 1 %-per-interval workload of issue 16: KEYS keys of keyed state, then a trickle of updates.

``python large_state_updates_job.py KEYS P BACKEND CHECKPOINT_MS UPDATES_PER_S SECONDS`` (BACKEND:
hashmap, rocksdb or rocksdb-incremental). One source subtask emits 0..KEYS-1 as fast as it can
(every key gets its state), then UPDATES_PER_S * SECONDS more numbers at UPDATES_PER_S, each a key not
updated before (n % KEYS), counted by P subtasks: the keys changed per checkpoint interval are known
exactly (UPDATES_PER_S * interval), so the bytes a checkpoint writes can be set against the bytes of
state that changed. Prints one line: ``large-state-updates keys=.. P=.. backend=.. seconds=.. records_per_s=..``.
"""
import sys
import time

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.common import Configuration
from pyflink.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend

KEYS, P, BACKEND, CHECKPOINT_MS = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
UPDATES_PER_S, SECONDS = float(sys.argv[5]), float(sys.argv[6])
UPDATES = int(UPDATES_PER_S * SECONDS)
assert UPDATES < KEYS, "every update must hit a key not updated before"

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(P)
if BACKEND.startswith("hashmap"):
    env.set_state_backend(HashMapStateBackend())
    if BACKEND == "hashmap-incremental":  # the heap backend's changelog (state.backend.incremental)
        env.configure(Configuration().set_string("state.backend.incremental", "true"))
else:
    env.set_state_backend(EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=BACKEND == "rocksdb-incremental"))
if CHECKPOINT_MS:
    env.enable_checkpointing(CHECKPOINT_MS)  # exactly-once


def paced(n, _clock=[None]):
    """The first KEYS numbers at full speed, the rest at UPDATES_PER_S (sleeping on the task thread)."""
    if n >= KEYS:
        if _clock[0] is None:
            _clock[0] = (time.time(), n)
        t0, n0 = _clock[0]
        wait = t0 + (n - n0) / UPDATES_PER_S - time.time()
        if wait > 0.002:
            time.sleep(wait)
    return n % KEYS, 1


numbers = env.from_source(NumberSequenceSource(0, KEYS + UPDATES - 1), WatermarkStrategy.no_watermarks(), "seq").set_parallelism(1)
pairs = numbers.map(paced, output_type=Types.TUPLE([Types.LONG(), Types.LONG()])).set_parallelism(1)
counts = pairs.key_by(lambda t: t[0], key_type=Types.LONG()).reduce(lambda a, b: (a[0], a[1] + b[1]))
final = counts.filter(lambda t: t[0] == 0 and t[1] == 2)
started = time.time()
with final.execute_and_collect("large-state-updates") as it:
    results = list(it)
elapsed = time.time() - started
assert results == [(0, 2)], f"expected [(0, 2)], got {results[:5]}"
total = KEYS + UPDATES
print(f"large-state-updates keys={KEYS} P={P} backend={BACKEND} seconds={elapsed:.2f} records_per_s={total / elapsed:.0f}")
