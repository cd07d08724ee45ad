"""The reference benchmark workload (shared/bench): a keyed rolling word count over 1..N.

Prints one line: ``millstream N=.. P=.. keys=.. seconds=.. records_per_s=..``.
``rolling_count_job.py N [P] [LABEL] [CHECKPOINT_MS] [forked]``: ``forked`` takes the heap backend's full
checkpoints in a forked child (``state.backend.hashmap.full-checkpoints-from-changes: false``).
"""
import sys
import time

from pyflink.common import Configuration, Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

N = int(sys.argv[1])
P = int(sys.argv[2]) if len(sys.argv) > 2 else 2
LABEL = sys.argv[3] if len(sys.argv) > 3 else "millstream"
CHECKPOINT_MS = int(sys.argv[4]) if len(sys.argv) > 4 else 0

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(P)
if CHECKPOINT_MS:
    env.enable_checkpointing(CHECKPOINT_MS)  # exactly-once
if len(sys.argv) > 5 and sys.argv[5] == "forked":
    env.configure(Configuration().set_string("state.backend.hashmap.full-checkpoints-from-changes", "false"))
numbers = env.from_source(NumberSequenceSource(1, N), WatermarkStrategy.no_watermarks(), "seq")
words = numbers.map(lambda n: ("w%d" % (n % 1000), 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
counts = words.key_by(lambda t: t[0], key_type=Types.STRING()).reduce(lambda a, b: (a[0], a[1] + b[1]))
final = counts.filter(lambda t: t[1] == N // 1000)
started = time.time()
with final.execute_and_collect("wordcount") as it:
    results = list(it)
elapsed = time.time() - started
assert len(results) == 1000, f"expected 1000 keys, got {len(results)}"
print(f"{LABEL} N={N} P={P} keys={len(results)} seconds={elapsed:.2f} records_per_s={N / elapsed:.0f}")
