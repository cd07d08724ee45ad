"""Copies Redis streams ``in-a`` and ``in-b`` to the stream ``out``, exactly once, with checkpoints every 300 ms.

Each record is slowed down by DELAY_US microseconds so a test can kill a TaskManager mid-stream.
Usage: redis_copy.py REDIS_URL DELAY_US
"""
import sys
import time

from pyflink.common import RestartStrategies, WatermarkStrategy
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.redis_streams import RedisStreamSink, RedisStreamSource

URL, DELAY = sys.argv[1], int(sys.argv[2]) / 1e6
env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(300, CheckpointingMode.EXACTLY_ONCE)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(5, 500))
source = RedisStreamSource(URL, ["in-a", "in-b"], start_id="0-0", bounded=True)
records = env.from_source(source, WatermarkStrategy.no_watermarks(), "streams").uid("streams")
records.map(lambda v: (time.sleep(DELAY), v + "!")[1]).uid("mark").sink_to(RedisStreamSink(URL, "out")).uid("out")
env.execute("redis copy")
