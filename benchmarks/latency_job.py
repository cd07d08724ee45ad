"""The latency benchmark's job (benchmarks/latency_bench.py): a source, a keyed shuffle into a map,
and a sink that keeps nothing, with a 10 ms buffer timeout and latency markers every INTERVAL ms
(0: off).

``latency_job.py paced RATE P INTERVAL``: unbounded, RATE records/s in all; runs until cancelled.
``latency_job.py throughput N P INTERVAL``: 1..N as fast as it goes; prints one line
``latency-job N=.. P=.. interval=.. seconds=.. records_per_s=..``.
"""
import sys
import time

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

MODE, AMOUNT, P, INTERVAL = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(P)
env.set_buffer_timeout(10)
env.get_config().set_latency_tracking_interval(INTERVAL)  # 0 turns markers off whatever the cluster says
if MODE == "paced":
    source = DataGeneratorSource(lambda i: i, None, records_per_second=AMOUNT)
    numbers = env.from_source(source, WatermarkStrategy.no_watermarks(), "paced")
else:
    numbers = env.from_source(NumberSequenceSource(1, AMOUNT), WatermarkStrategy.no_watermarks(), "seq")
keyed = numbers.key_by(lambda n: n % 1000, key_type=Types.LONG()).map(lambda n: n + 1, output_type=Types.LONG())
kept = keyed.filter(lambda n: n < 0)  # nothing: the sink costs nothing, the shuffle is what is measured
if MODE == "paced":
    kept.print()
    env.execute(f"latency paced {AMOUNT}/s interval {INTERVAL}")
else:
    started = time.time()
    with kept.execute_and_collect("latency throughput") as it:
        assert list(it) == []
    elapsed = time.time() - started
    print(f"latency-job N={AMOUNT} P={P} interval={INTERVAL} seconds={elapsed:.2f} records_per_s={AMOUNT / elapsed:.0f}")
