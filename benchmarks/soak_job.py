"""The soak benchmark's long job: a keyed count over 1000 keys at a steady rate, with exactly-once
checkpoints every second, every update written to an exactly-once FileSink.

Usage: soak_job.py N RATE OUT_DIR (N records at RATE records per second over all subtasks).
"""
import sys

from pyflink.common import WatermarkStrategy
from pyflink.common.serialization import Encoder
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.connectors.file_system import FileSink, RollingPolicy

N, RATE, OUT = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.enable_checkpointing(1000, CheckpointingMode.EXACTLY_ONCE)
source = DataGeneratorSource(lambda i: ("k%d" % (i % 1000), 1), N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])))
sink = (FileSink.for_row_format(OUT, Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .build())
counts.map(lambda t: "%s,%d" % t).sink_to(sink)
env.execute("soak")
