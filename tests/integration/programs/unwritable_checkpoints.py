"""A slow keyed count whose checkpoints go to a directory that cannot be created.

Tolerates TOLERABLE failed checkpoints, and does not restart: once more fail in a row, the job fails.
Usage: unwritable_checkpoints.py CHECKPOINT_DIR TOLERABLE
"""
import sys

from pyflink.common import RestartStrategies, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

DIRECTORY, TOLERABLE = sys.argv[1], int(sys.argv[2])
env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(400)
config = env.get_checkpoint_config()
config.set_checkpoint_storage_dir(DIRECTORY)
config.set_tolerable_checkpoint_failure_number(TOLERABLE)
env.set_restart_strategy(RestartStrategies.no_restart())
source = DataGeneratorSource(lambda i: ("k%d" % (i % 4), 1), None, records_per_second=200)
(env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
    .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).print())
env.execute("unwritable checkpoints")
