"""Records cross two network hops (rebalance, key_by) at a steady rate and end in exact per-key
totals: the program for deleting credit tokens while it runs. Writes the totals, as JSON, to OUT.
Usage: credit_starved.py N RATE OUT
"""
import json
import sys

from pyflink.common import WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

N, RATE, OUT = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
KEYS = 8
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
source = DataGeneratorSource(lambda i: i, N, records_per_second=RATE)
totals = (
    env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
    .rebalance()
    .map(lambda v: (v % KEYS, 1, v))
    .key_by(lambda t: t[0])
    .reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2]))
    .filter(lambda t: t[1] == N // KEYS)  # only each key's last update: its count is complete
)
with totals.execute_and_collect("credit starved") as results:
    received = sorted(list(r) for r in results)
with open(OUT, "w") as f:
    json.dump(received, f)
print("received", len(received))
