"""collected_count.py with a slow client: after PAUSE_AT updates the client writes PAUSED and reads
nothing more until RESUME exists (a client far behind its job). Usage:
slow_collected_count.py N RATE OUT PAUSE_AT PAUSED RESUME
"""
import json
import os
import sys
import time

from pyflink.common import RestartStrategies, WatermarkStrategy
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

N, RATE, OUT = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
PAUSE_AT, PAUSED, RESUME = int(sys.argv[4]), sys.argv[5], sys.argv[6]
env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(500, CheckpointingMode.EXACTLY_ONCE)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(10, 500))
source = DataGeneratorSource(lambda i: ("k%d" % (i % 40), 1), N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts"))
received = []
with counts.execute_and_collect("slowly collected count") as updates:
    for u in updates:
        received.append(list(u))
        if len(received) == PAUSE_AT:
            open(PAUSED, "w").close()
            deadline = time.monotonic() + 150
            while not os.path.exists(RESUME) and time.monotonic() < deadline:
                time.sleep(0.1)
with open(OUT, "w") as f:
    json.dump(received, f)
print("received", len(received))
