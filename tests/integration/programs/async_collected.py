"""AsyncDataStream.ordered_wait on a generated stream, every result to execute_and_collect, with
exactly-once checkpoints every 500 ms and restarts on failure. Each call sleeps 10-60 ms, so a few
dozen records are in flight at every checkpoint. Writes what the client received, in order, to
OUT as JSON. Usage: async_collected.py N RATE OUT
"""
import asyncio
import json
import random
import sys

from pyflink.common import RestartStrategies, Time, Types, WatermarkStrategy
from pyflink.datastream import AsyncDataStream, AsyncFunction, CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

N, RATE, OUT = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]


class SlowLookup(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.sleep(random.uniform(0.01, 0.06))
        return [(value, "a"), (value, "b")]  # two results per record: both or neither must arrive


env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(500, CheckpointingMode.EXACTLY_ONCE)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(10, 500))
source = DataGeneratorSource(lambda i: i, N, records_per_second=RATE)
numbers = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
looked_up = AsyncDataStream.ordered_wait(numbers, SlowLookup(), Time.seconds(30), 40).uid("lookup")
with looked_up.execute_and_collect("async lookup") as results:
    received = [list(r) for r in results]
with open(OUT, "w") as f:
    json.dump(received, f)
print("received", len(received))
