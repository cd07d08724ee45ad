"""env.from_source with a NumberSequenceSource (bounded, parallel), summed per remainder."""
from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
numbers = env.from_source(NumberSequenceSource(1, 20), WatermarkStrategy.no_watermarks(), "numbers")
sums = numbers.key_by(lambda n: n % 3, key_type=Types.INT()).reduce(lambda a, b: a + b)
print(sorted(sums.execute_and_collect()))
