"""A keyed count over 40 keys with exactly-once checkpoints every 500 ms, restarting on failure.

Emits every count that reached N/40 or more: with exactly-once state each key emits N/40
(possibly more than once after a replay) and never anything larger.
Usage: recovering_count.py N RATE
"""
import json
import sys

from pyflink.common import RestartStrategies, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

N, RATE = int(sys.argv[1]), float(sys.argv[2])
env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(500)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(10, 500))
source = DataGeneratorSource(lambda i: ("k%d" % (i % 40), 1), N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts"))
final = counts.filter(lambda t: t[1] >= N // 40)
print(json.dumps(sorted(set(final.execute_and_collect("recovering count")))))
