"""An unbounded, rate-limited job that only ends when cancelled."""
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.common import WatermarkStrategy

env = StreamExecutionEnvironment.get_execution_environment()
source = DataGeneratorSource(lambda i: ("k%d" % (i % 7), i), None, records_per_second=2000)
stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "generator")
stream.key_by(lambda t: t[0]).sum(1).filter(lambda t: t[1] < 0).print()
env.execute("unbounded")
