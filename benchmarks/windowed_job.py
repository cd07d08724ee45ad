"""Windowed benchmark: a 1 s tumbling event-time sum per key over N out-of-order events, 1000 keys.

Prints ``<label> N=.. P=.. windows=.. seconds=.. records_per_s=..``.
"""
import sys
import time

from pyflink.common import Duration, Time, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.window import TumblingEventTimeWindows

N = int(sys.argv[1])
P = int(sys.argv[2]) if len(sys.argv) > 2 else 2
LABEL = sys.argv[3] if len(sys.argv) > 3 else "millstream-windowed"


def event(i):
    # 10 events per ms of event time, out of order by up to 15 ms
    return ("w%d" % (i % 1000), i // 10 + ((i * 37) % 7 - 3) * 5, 1)


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(P)
strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(50)).with_timestamp_assigner(Ts())
events = env.from_source(DataGeneratorSource(event, N), strategy, "events")
sums = (events.key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .reduce(lambda a, b: (a[0], a[1], a[2] + b[2])))
started = time.time()
with sums.execute_and_collect("windowed sum") as it:
    total = sum(r[2] for r in it)
elapsed = time.time() - started
assert total == N, f"windows summed {total} of {N} events"
print(f"{LABEL} N={N} P={P} seconds={elapsed:.2f} records_per_s={N / elapsed:.0f}")
