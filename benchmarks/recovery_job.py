"""Recovery benchmark job: a keyed count over 1000 keys, checkpointed every second, that keeps
printing ``<attempt> <processing time ms>`` so the benchmark sees when a new attempt processes records.

Usage: recovery_job.py N RATE (records per second over all subtasks).
"""
import sys
import time

from pyflink.common import WatermarkStrategy
from pyflink.datastream import MapFunction, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

N, RATE = int(sys.argv[1]), float(sys.argv[2])


class StampAttempt(MapFunction):
    """Marks output with the attempt that produced it: stamps of attempt > 0 come after a restart."""

    def open(self, runtime_context):
        self.attempt = runtime_context.get_attempt_number()

    def map(self, value):
        return self.attempt, int(time.time() * 1000)


env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(1000)  # exactly-once; Flink's default fixed-delay restart strategy applies
source = DataGeneratorSource(lambda i: ("k%d" % (i % 1000), 1), N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])))
# About one stamp per 50 records per key: a few hundred lines a second at the default rate.
stamps = counts.filter(lambda t: t[1] % 50 == 0).map(StampAttempt())
with stamps.execute_and_collect("recovery") as it:
    for attempt, at_ms in it:
        print(attempt, at_ms, flush=True)
