"""Event-time timers and windows across a stop-with-savepoint and a restore at another parallelism.

A KeyedProcessFunction counts each key's events per second in MapState and emits the count from an
event-time timer at the second's end; a tumbling 1 s window with a ProcessWindowFunction counts the
same. Prints every result as JSON. Usage: rescaled_timers.py N RATE
"""
import json
import sys

from pyflink.common import Time, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import KeyedProcessFunction, ProcessWindowFunction, StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.state import MapStateDescriptor
from pyflink.datastream.window import TumblingEventTimeWindows

N, RATE = int(sys.argv[1]), float(sys.argv[2])


def event(i):
    return (i % 7, i * 5)  # (key, timestamp ms)


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class PerSecond(KeyedProcessFunction):
    def open(self, runtime_context):
        self.counts = runtime_context.get_map_state(MapStateDescriptor("per_second", None, None))

    def process_element(self, value, ctx):
        sec = value[1] // 1000
        self.counts.put(sec, (self.counts.get(sec) or 0) + 1)
        ctx.timer_service().register_event_time_timer(sec * 1000 + 999)

    def on_timer(self, timestamp, ctx):
        sec = timestamp // 1000
        yield ["timer", ctx.get_current_key(), sec, self.counts.get(sec)]
        self.counts.remove(sec)


class CountWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield ["window", key, context.window().start // 1000, len(list(elements))]


env = StreamExecutionEnvironment.get_execution_environment()
strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())
events = env.from_source(DataGeneratorSource(event, N, records_per_second=RATE), strategy, "events").uid("events")
keyed = events.key_by(lambda e: e[0])
timers = keyed.process(PerSecond()).uid("per-second")
windows = keyed.window(TumblingEventTimeWindows.of(Time.seconds(1))).process(CountWindow()).uid("windows")
for result in timers.union(windows).execute_and_collect("rescaled timers"):
    print(json.dumps(list(result)), flush=True)
