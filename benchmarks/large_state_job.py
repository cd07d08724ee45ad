"""The large-state workload (issue 16): a keyed count over N records with K distinct keys.

``python large_state_job.py N P KEYS BACKEND CHECKPOINT_MS [KEY_TYPE]`` (BACKEND: hashmap, hashmap-incremental,
hashmap-forked, rocksdb or rocksdb-incremental: ``-incremental`` sets ``state.backend.incremental: true``,
``hashmap-forked`` ``state.backend.hashmap.full-checkpoints-from-changes: false``;
CHECKPOINT_MS 0: no checkpoints; KEY_TYPE ``long``, the default, or ``string``: the keys as strings
``user-<n>``, as a job keyed by user ids or words holds them; ``string-untyped``: the same keys with
no key type given to ``key_by``, as most PyFlink programs key). Every key is counted N // KEYS times, so the job holds KEYS
entries of keyed state at the end; only key 0's final count reaches the collect sink, which keeps
the sink out of the measurement. Prints one line:
``large-state N=.. keys=.. P=.. backend=.. seconds=.. records_per_s=..``.
"""
import sys
import time

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend

N = int(sys.argv[1])
P = int(sys.argv[2])
KEYS = int(sys.argv[3])
BACKEND = sys.argv[4]
CHECKPOINT_MS = int(sys.argv[5])
KEY_TYPE = sys.argv[6] if len(sys.argv) > 6 else "long"
STRING_KEYS = KEY_TYPE in ("string", "string-untyped")

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(P)
if BACKEND.startswith("hashmap"):
    env.set_state_backend(HashMapStateBackend())
    if BACKEND == "hashmap-incremental":
        env.configure(Configuration().set_string("state.backend.incremental", "true"))
    elif BACKEND == "hashmap-forked":  # full checkpoints pickled whole in a forked child, as before issue 16's change 29
        env.configure(Configuration().set_string("state.backend.hashmap.full-checkpoints-from-changes", "false"))
else:
    env.set_state_backend(EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=BACKEND == "rocksdb-incremental"))
if CHECKPOINT_MS:
    env.enable_checkpointing(CHECKPOINT_MS)  # exactly-once
numbers = env.from_source(NumberSequenceSource(0, N - 1), WatermarkStrategy.no_watermarks(), "seq")
if STRING_KEYS:
    key_type, first = Types.STRING(), "user-0"
    pairs = numbers.map(lambda n: (f"user-{n % KEYS}", 1), output_type=Types.TUPLE([key_type, Types.LONG()]))
else:
    key_type, first = Types.LONG(), 0
    pairs = numbers.map(lambda n: (n % KEYS, 1), output_type=Types.TUPLE([key_type, Types.LONG()]))
# string-untyped: key_by without a key type, as most PyFlink programs write it (keys hashed by pickle)
keyed = pairs.key_by(lambda t: t[0]) if KEY_TYPE == "string-untyped" else pairs.key_by(lambda t: t[0], key_type=key_type)
counts = keyed.reduce(lambda a, b: (a[0], a[1] + b[1]))
final = counts.filter(lambda t: t[0] == first and t[1] == N // KEYS)
started = time.time()
with final.execute_and_collect("large-state") as it:
    results = list(it)
elapsed = time.time() - started
assert results == [(first, N // KEYS)], f"expected [({first!r}, {N // KEYS})], got {results[:5]}"
print(f"large-state N={N} keys={KEYS}{' (strings)' if KEY_TYPE == 'string' else ' (untyped strings)' if STRING_KEYS else ''} P={P} backend={BACKEND} seconds={elapsed:.2f} records_per_s={N / elapsed:.0f}")
