"""An unbounded, rate-limited job that restarts after any failure and only ends when cancelled."""
from pyflink.common import RestartStrategies, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource

env = StreamExecutionEnvironment.get_execution_environment()
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(100, 200))
source = DataGeneratorSource(lambda i: ("k%d" % (i % 7), i), None, records_per_second=2000)
stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "generator")
stream.key_by(lambda t: t[0]).sum(1).filter(lambda t: t[1] < 0).print()
env.execute("unbounded, restarting")
