"""A rate-limited job whose map fails once, on its first attempt, then runs until cancelled."""
from pyflink.common import RestartStrategies, WatermarkStrategy
from pyflink.datastream import MapFunction, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource


class FailOnce(MapFunction):
    def open(self, runtime_context):
        self.attempt = runtime_context.get_attempt_number()

    def map(self, value):
        if self.attempt == 0 and value >= 200:
            raise RuntimeError("the first attempt fails on purpose")
        return value


env = StreamExecutionEnvironment.get_execution_environment()
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
source = DataGeneratorSource(lambda i: i, None, records_per_second=400)
env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers").rebalance().map(FailOnce()).filter(
    lambda v: v < 0).print()
env.execute("fails once")
