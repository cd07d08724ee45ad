"""Counts records with user metrics (PyFlink's MetricGroup API): a counter, a meter, a gauge and a
distribution in a map, under a group and a key-value group."""
import sys

from pyflink.common import WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.functions import MapFunction, RuntimeContext

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
RATE = float(sys.argv[2]) if len(sys.argv) > 2 else None  # records per second: a job that runs a while


class Counted(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        group = runtime_context.get_metrics_group().add_group("my_group")
        self.events = group.counter("events")
        self.rate = group.meter("events_rate", time_span_in_seconds=60)
        self.sizes = group.add_group("kind", "even").distribution("values")
        self.last = 0
        group.gauge("last", lambda: self.last)

    def map(self, value):
        self.events.inc()
        self.rate.mark_event()
        if value % 2 == 0:
            self.sizes.update(value)
        self.last = value
        return value


env = StreamExecutionEnvironment.get_execution_environment()
if RATE:
    source = DataGeneratorSource(lambda i: i + 1, N, records_per_second=RATE)
else:
    source = NumberSequenceSource(1, N)
numbers = env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
numbers.map(Counted()).filter(lambda v: v == N).print()
env.execute("user metrics")
