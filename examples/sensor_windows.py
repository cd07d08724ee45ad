"""A job that runs until you stop it: per-sensor averages over 10-second event-time windows.

An unbounded source generates readings from eight sensors (20 per second, each stamped with its
event time); a watermark that tolerates 2 seconds of disorder drives tumbling windows per sensor,
checkpoints are taken every 5 seconds, exactly once. Each window prints one line:
``(sensor-3,10000,20000,20,21.7)`` = sensor, window start and end (ms), readings, average.

Run it on a local cluster, then try the commands of the README's quick start on it:
    millstream run --detached -p 2 examples/sensor_windows.py
    millstream savepoint <job id>
    millstream stop <job id>
    millstream run --detached -p 3 --from-savepoint <path> examples/sensor_windows.py
Run it in-process (Ctrl-C to stop):   python examples/sensor_windows.py
An optional argument sets the readings per second.
"""
import sys

from pyflink.common import Duration, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import CheckpointingMode, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows

SENSORS = 8


def reading(i: int) -> tuple:
    """The i-th reading: (sensor, event time in ms, temperature); 50 ms of event time apart."""
    sensor = f"sensor-{i % SENSORS}"
    return sensor, i * 50, 15.0 + (i * 7919 % 200) / 10.0


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Average(ProcessWindowFunction):
    def process(self, key, context, elements):
        temps = [e[2] for e in elements]
        window = context.window()
        yield key, window.start, window.end, len(temps), round(sum(temps) / len(temps), 1)


def main(rate: float) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(5000, CheckpointingMode.EXACTLY_ONCE)
    watermarks = (
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2))
        .with_timestamp_assigner(EventTime())
    )
    readings = env.from_source(
        DataGeneratorSource(reading, None, records_per_second=rate,
                            type_info=Types.TUPLE([Types.STRING(), Types.LONG(), Types.DOUBLE()])),
        watermarks, "sensor readings",
    ).uid("readings")
    averages = (
        readings.key_by(lambda r: r[0], key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(Duration.of_seconds(10)))
        .process(Average(), Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.INT(), Types.DOUBLE()]))
        .uid("averages")
    )
    averages.print().uid("print")
    env.execute("sensor windows")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 20.0)
