"""An unbounded job of 1 KB records collected by a client that reads nothing: it takes the
iterator, then sleeps until killed. Usage: unread_collect.py
"""
import time

from pyflink.common import WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

env = StreamExecutionEnvironment.get_execution_environment()
source = DataGeneratorSource(lambda i: "%08d" % i + "x" * 1016, None)
results = env.from_source(source, WatermarkStrategy.no_watermarks(), "kilobytes").execute_and_collect("unread")
print("collecting", flush=True)
time.sleep(3600)
