"""The first records of an unbounded job with execute_and_collect(limit=...): prints them as JSON.
Usage: collect_limit.py LIMIT
"""
import json
import sys

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
source = DataGeneratorSource(lambda i: i, None, records_per_second=5000)
numbers = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers", Types.LONG())
first = numbers.map(lambda n: n * 3, output_type=Types.LONG()).execute_and_collect("limited", limit=int(sys.argv[1]))
print(json.dumps(first))
