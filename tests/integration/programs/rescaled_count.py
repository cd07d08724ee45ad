"""A keyed count over 40 keys from a rate-limited, replayable generator; prints every update.

No periodic checkpoints: savepoints need none. The counting operator's uid is the
third argument (default "counts"), so a test can rename it to leave state unmatched.
Usage: rescaled_count.py N RATE [COUNT_UID]
"""
import json
import sys

from pyflink.common import WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

N, RATE = int(sys.argv[1]), float(sys.argv[2])
count_uid = sys.argv[3] if len(sys.argv) > 3 else "counts"
env = StreamExecutionEnvironment.get_execution_environment()
source = DataGeneratorSource(lambda i: ("k%d" % (i % 40), 1), N, records_per_second=RATE)
counts = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").uid("numbers")
          .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).uid(count_uid))
for update in counts.execute_and_collect("rescaled count"):
    print(json.dumps(update), flush=True)
