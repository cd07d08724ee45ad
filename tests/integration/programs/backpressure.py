"""A fast unbounded source feeding a slow map: the source must be throttled by credits."""
import time

from pyflink.common import WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource


def slow(x):
    time.sleep(0.002)
    return x


env = StreamExecutionEnvironment.get_execution_environment()
source = env.from_source(DataGeneratorSource(lambda i: "x" * 100, None), WatermarkStrategy.no_watermarks(), "fast source")
source.rebalance().map(slow).name("slow map").filter(lambda x: False).print()
env.execute("backpressure")
