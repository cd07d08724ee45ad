"""A keyed count over 40 keys with checkpoints every 500 ms, restarting on failure.

Without OUT_DIR it collects every count that reached N/40 or more and prints them as JSON:
with exactly-once state each key reaches N/40 and never anything larger. With OUT_DIR, every
count update goes to a FileSink as ``key,count`` lines instead (exactly once in its committed
files) and the program prints ``[]`` when the job is done: execute_and_collect runs only the
collected stream, as in PyFlink, so the two cannot share one job. With AT_LEAST_ONCE,
checkpoints are at-least-once.
Usage: recovering_count.py N RATE [OUT_DIR|-] [AT_LEAST_ONCE]
"""
import json
import sys

from pyflink.common import RestartStrategies, WatermarkStrategy
from pyflink.common.serialization import Encoder
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy

N, RATE = int(sys.argv[1]), float(sys.argv[2])
OUT = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
mode = CheckpointingMode.AT_LEAST_ONCE if len(sys.argv) > 4 else CheckpointingMode.EXACTLY_ONCE
env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(500, mode)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(10, 500))
source = DataGeneratorSource(lambda i: ("k%d" % (i % 40), 1), N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts"))
if OUT:
    # Small parts: files roll (pending, then committed) between checkpoints and stay open across them.
    sink = (FileSink.for_row_format(OUT, Encoder.simple_string_encoder())
            .with_rolling_policy(RollingPolicy.default_rolling_policy(part_size=16 * 1024))
            .build())
    counts.map(lambda t: "%s,%d" % t).uid("lines").sink_to(sink).uid("files")
    env.execute("recovering count")
    print(json.dumps([]))
else:
    final = counts.filter(lambda t: t[1] >= N // 40)
    print(json.dumps(sorted(set(final.execute_and_collect("recovering count")))))
