"""env.from_source with a NumberSequenceSource (bounded, parallel), summed per remainder.

The two source subtasks interleave differently in every run, so the running sums do too: the
program prints the final sum of each key, which is the same in every run.
"""
from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
numbers = env.from_source(NumberSequenceSource(1, 20), WatermarkStrategy.no_watermarks(), "numbers")
pairs = numbers.map(lambda n: (n % 3, n), output_type=Types.TUPLE([Types.INT(), Types.LONG()]))
sums = pairs.key_by(lambda t: t[0], key_type=Types.INT()).reduce(lambda a, b: (a[0], a[1] + b[1]))
final = {}
for key, total in sums.execute_and_collect():
    final[key] = max(final.get(key, 0), total)
print(sorted(final.items()))
