"""A bounded job whose checkpoint expires once: one record stalls a map past the checkpoint timeout.

Usage: stalled_checkpoint.py N MARKER_FILE

The first attempt to reach record N // 2 creates MARKER_FILE and sleeps 4 s, so the checkpoint in
flight (2 s timeout, no tolerable failures) expires and the job restarts; later attempts find the
marker and go straight through. Prints the sum of the records.
"""
import os
import sys
import time

from pyflink.common import RestartStrategies, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

N, MARKER = int(sys.argv[1]), sys.argv[2]


def stall_once(x):
    if x == N // 2 and not os.path.exists(MARKER):
        open(MARKER, "w").close()
        time.sleep(4)
    return x


env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(200)
env.get_checkpoint_config().set_checkpoint_timeout(2000)
env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(0)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(5, 100))
source = DataGeneratorSource(lambda i: i, N, records_per_second=N / 3)
numbers = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
numbers.map(stall_once).uid("stall").key_by(lambda x: x % 4).reduce(lambda a, b: a + b).uid("sum").print()
env.execute("stalled checkpoint")
