"""A job that runs until cancelled for flame graphs and latency markers: a rate-limited source, a keyed
shuffle into a map whose ``burn_cpu`` spins on the CPU for 2 ms per record (100 records/s per subtask:
a short burst every 10 ms), a tumbling processing-time window (markers must
pass it without waiting for it to fire) and a sink; latency markers every 100 ms, set per job as PyFlink allows."""
import sys
import time

from pyflink.common import Time, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.functions import MapFunction, RuntimeContext
from pyflink.datastream.window import TumblingProcessingTimeWindows


def burn_cpu(value):
    until = time.perf_counter() + 0.002  # 2 ms of pure computation per record, however fast the machine
    total = 0
    while time.perf_counter() < until:
        total += 1
    return (value % 4, total % 2 + 1)


class Burn(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        # The interpreter's switch interval where the task runs, in µs (a slot process sets 1 ms).
        group = runtime_context.get_metrics_group().add_group("interpreter")
        group.gauge("switch_interval_us", lambda: round(sys.getswitchinterval() * 1e6))

    def map(self, value):
        return burn_cpu(value)


env = StreamExecutionEnvironment.get_execution_environment()
env.get_config().set_latency_tracking_interval(100)
numbers = env.from_source(
    DataGeneratorSource(lambda i: i, None, records_per_second=200), WatermarkStrategy.no_watermarks(), "numbers"
)
(numbers.key_by(lambda v: v % 4).map(Burn()).name("burn")
    .key_by(lambda kv: kv[0]).window(TumblingProcessingTimeWindows.of(Time.seconds(1)))
    .reduce(lambda a, b: (a[0], a[1] + b[1])).filter(lambda kv: kv[1] < 0).print())
env.execute("profiled")
