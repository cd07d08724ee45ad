"""The reference rolling word count; prints every collected update as JSON lines."""
import json
import sys

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

N = int(sys.argv[1])
KEYS = int(sys.argv[2]) if len(sys.argv) > 2 else 1000

env = StreamExecutionEnvironment.get_execution_environment()
numbers = env.from_source(NumberSequenceSource(1, N), WatermarkStrategy.no_watermarks(), "numbers")
words = numbers.map(lambda n: ("w%d" % (n % KEYS), 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
counts = words.key_by(lambda t: t[0], key_type=Types.STRING()).reduce(lambda a, b: (a[0], a[1] + b[1]))
if len(sys.argv) > 3 and sys.argv[3] == "print":
    counts.print()
    env.execute("rolling count")
else:
    with counts.execute_and_collect("rolling count") as results:
        for word, count in results:
            print(json.dumps([word, count]))
