"""A keyed count over 40 keys whose every update goes to execute_and_collect, with exactly-once
checkpoints every 500 ms and restarts on failure. Writes what the client received, in order, to OUT
as JSON. Usage: collected_count.py N RATE OUT
"""
import json
import sys

from pyflink.common import RestartStrategies, WatermarkStrategy
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

N, RATE, OUT = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(500, CheckpointingMode.EXACTLY_ONCE)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(10, 500))
source = DataGeneratorSource(lambda i: ("k%d" % (i % 40), 1), N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts"))
with counts.execute_and_collect("collected count") as updates:
    received = [list(u) for u in updates]
with open(OUT, "w") as f:
    json.dump(received, f)
print("received", len(received))
