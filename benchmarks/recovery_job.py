"""Recovery benchmark job: a keyed count over 1000 keys, checkpointed every second, that keeps
printing ``<attempt> <processing time ms>`` so the benchmark sees when a new attempt processes records.

Usage: recovery_job.py N RATE [P] [KEYS BACKEND] (RATE: records per second over all subtasks; KEYS, default
1000, distinct keys in turn; BACKEND hashmap, hashmap-incremental, rocksdb or rocksdb-incremental). With
KEYS given, lines are ``<attempt> <processing time ms> <key index>``, one per 1000 keys.
"""
import sys
import time

from pyflink.common import Configuration, WatermarkStrategy
from pyflink.datastream import MapFunction, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend

N, RATE = int(sys.argv[1]), float(sys.argv[2])
KEYS = int(sys.argv[4]) if len(sys.argv) > 4 else 0
BACKEND = sys.argv[5] if len(sys.argv) > 5 else "hashmap"


class StampAttempt(MapFunction):
    """Marks output with the attempt that produced it: stamps of attempt > 0 come after a restart."""

    def open(self, runtime_context):
        self.attempt = runtime_context.get_attempt_number()

    def map(self, value):
        return self.attempt, int(time.time() * 1000), value[0]


env = StreamExecutionEnvironment.get_execution_environment()
if KEYS:
    if BACKEND.startswith("hashmap"):
        env.set_state_backend(HashMapStateBackend())
        if BACKEND.endswith("-incremental"):
            env.configure(Configuration().set_string("state.backend.incremental", "true"))
    else:
        env.set_state_backend(EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=BACKEND.endswith("-incremental")))
env.enable_checkpointing(1000 if not KEYS else 2000)  # exactly-once; Flink's default fixed-delay restart strategy applies
if KEYS:  # large state: key i % KEYS, one stamp per 1000 keys
    source = DataGeneratorSource(lambda i: (i % KEYS, 1), N, records_per_second=RATE)
else:
    source = DataGeneratorSource(lambda i: ("k%d" % (i % 1000), 1), N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])))
if KEYS:
    stamps = counts.filter(lambda t: t[0] % 1000 == 0).map(StampAttempt())
else:
    # About one stamp per 50 records per key: a few hundred lines a second at the default rate.
    stamps = counts.filter(lambda t: t[1] % 50 == 0).map(StampAttempt())
with stamps.execute_and_collect("recovery") as it:
    for attempt, at_ms, key in it:
        print(attempt, at_ms, *([key] if KEYS else []), flush=True)
