"""The larger-than-memory workload (issue 16): a keyed count over N distinct keys, checked exactly.

``python larger_than_memory_job.py N P BACKEND CHECKPOINT_MS`` (BACKEND: hashmap, rocksdb or rocksdb-incremental;
CHECKPOINT_MS 0: no checkpoints). Every key in [0, N) is counted once, so the keyed count holds N
entries of state at the end. To check that every key was counted exactly once without sending N
records to the client, every count the keyed count emits adds 1 to one of BUCKETS small buckets
(key % BUCKETS, a second keyed sum whose state stays tiny). The final filter passes a bucket's sum
once it reaches the number of keys in that bucket, and every sum past it: the job asserts that
exactly one sum per bucket arrives, equal to the bucket's size, so a key lost or counted twice
fails the run. Prints one line:
``larger-than-memory N=.. P=.. backend=.. seconds=.. records_per_s=.. keys_counted=..``.
"""
import sys
import time

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend

N = int(sys.argv[1])
P = int(sys.argv[2])
BACKEND = sys.argv[3]
CHECKPOINT_MS = int(sys.argv[4])
BUCKETS = 64


def bucket_size(b: int) -> int:
    """How many keys in [0, N) fall in bucket b."""
    return N // BUCKETS + (1 if b < N % BUCKETS else 0)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(P)
if BACKEND == "hashmap":
    env.set_state_backend(HashMapStateBackend())
else:
    env.set_state_backend(EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=BACKEND == "rocksdb-incremental"))
if CHECKPOINT_MS:
    env.enable_checkpointing(CHECKPOINT_MS)  # exactly-once
pair = Types.TUPLE([Types.LONG(), Types.LONG()])
numbers = env.from_source(NumberSequenceSource(0, N - 1), WatermarkStrategy.no_watermarks(), "seq")
counts = (
    numbers.map(lambda n: (n, 1), output_type=pair)
    .key_by(lambda t: t[0], key_type=Types.LONG())
    .reduce(lambda a, b: (a[0], a[1] + b[1]))  # the large state: N keys
)
# Each count emitted adds 1 to its key's bucket: a key counted twice overshoots its bucket.
buckets = (
    counts.map(lambda t: (t[0] % BUCKETS, 1), output_type=pair)
    .key_by(lambda t: t[0], key_type=Types.LONG())
    .reduce(lambda a, b: (a[0], a[1] + b[1]))
)
complete = buckets.filter(lambda t: t[1] >= bucket_size(t[0]))
started = time.time()
with complete.execute_and_collect("larger-than-memory") as it:
    results = sorted(it)
elapsed = time.time() - started
expected = [(b, bucket_size(b)) for b in range(BUCKETS) if bucket_size(b)]
assert results == expected, f"bucket sums differ: got {len(results)} complete buckets of {len(expected)}: {results[:5]}"
print(
    f"larger-than-memory N={N} P={P} backend={BACKEND} seconds={elapsed:.2f} records_per_s={N / elapsed:.0f} "
    f"keys_counted={sum(c for _, c in results)}"
)
