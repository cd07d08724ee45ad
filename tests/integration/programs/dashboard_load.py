"""A rate-limited job that runs until cancelled and gives every panel of the Grafana dashboard
(monitoring/grafana/dashboards/) data: checkpoints every 500 ms, event time with watermarks, a keyed
tumbling window behind a network shuffle, and one record in 25 so far behind the watermark that the
window drops it (numLateRecordsDropped)."""
from pyflink.common import Duration, Time, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.window import TumblingEventTimeWindows

START_MS = 1_000_000
LATE_BY_MS = 60_000  # far behind any watermark: at 200 records/s event time runs 2 s per second


def event(i):
    """(key, event time, 1): 10 ms of event time per record, every 25th a minute in the past."""
    ts = START_MS + 10 * i
    return (f"k{i % 4}", ts - LATE_BY_MS if i % 25 == 24 else ts, 1)


class SecondField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.enable_checkpointing(500)
watermarks = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(200)).with_timestamp_assigner(SecondField())
events = env.from_source(DataGeneratorSource(event, None, records_per_second=200), watermarks, "events")
counts = (events.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(1)))
          .reduce(lambda a, b: (a[0], a[1], a[2] + b[2])))
counts.filter(lambda c: c[2] < 0).print()
env.execute("dashboard")
