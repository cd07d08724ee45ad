"""A keyed count over a rate-limited generator with exactly-once checkpoints every 300 ms.

Usage: checkpointed_count.py N RATE [AT_LEAST_ONCE]
"""
import sys

from pyflink.common import WatermarkStrategy
from pyflink.datastream import CheckpointingMode, ExternalizedCheckpointRetention, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

N, RATE = int(sys.argv[1]), float(sys.argv[2])
mode = CheckpointingMode.AT_LEAST_ONCE if len(sys.argv) > 3 else CheckpointingMode.EXACTLY_ONCE

env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(300, mode)
config = env.get_checkpoint_config()
config.set_num_retained_checkpoints(3)
config.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
source = DataGeneratorSource(lambda i: ("k%d" % (i % 40), 1), N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid("counts"))
counts.filter(lambda t: t[1] == N // 40).print()
env.execute("checkpointed count")
