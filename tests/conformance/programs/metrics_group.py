"""Metric group calls from a user function (counter, gauge, meter, distribution, sub-groups); the
records pass through unchanged and the counter's own count is part of the output."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import MapFunction, RuntimeContext


class Counted(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        group = runtime_context.get_metrics_group().add_group("conformance").add_group("kind", "test")
        self.counter = group.counter("records")
        self.meter = group.meter("rate", time_span_in_seconds=60)
        self.distribution = group.distribution("sizes")
        self.last = 0
        group.gauge("last", lambda: self.last)

    def map(self, value):
        self.counter.inc()
        self.counter.inc(2)
        self.counter.dec()
        self.meter.mark_event()
        self.distribution.update(value)
        self.last = value
        return f"{value} count={self.counter.get_count()}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([5, 6, 7], type_info=Types.INT())
ds.map(Counted(), output_type=Types.STRING()).print()
env.execute()
