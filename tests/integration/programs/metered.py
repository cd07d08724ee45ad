"""A rate-limited job that runs until cancelled, with user metrics (a counter, a meter, a gauge and a
distribution) in a map behind a network shuffle, so the map's subtasks have records in; checkpoints
every 500 ms."""
from pyflink.common import WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.functions import MapFunction, RuntimeContext


class Counted(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        group = runtime_context.get_metrics_group().add_group("my_group")
        self.events = group.counter("events")
        self.rate = group.meter("events_rate", time_span_in_seconds=60)
        self.values = group.distribution("values")
        self.last = 0
        group.gauge("last", lambda: self.last)

    def map(self, value):
        self.events.inc()
        self.rate.mark_event()
        self.values.update(value)
        self.last = value
        return value


env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(500)
numbers = env.from_source(DataGeneratorSource(lambda i: i + 1, None, records_per_second=400), WatermarkStrategy.no_watermarks(), "numbers")
numbers.rebalance().map(Counted()).filter(lambda v: v < 0).print()
env.execute("metered")
