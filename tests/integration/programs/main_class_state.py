"""Keyed state holding instances of classes defined in this program, across a savepoint.

Readings (a dataclass) from a rate-limited generator are keyed by a frozen dataclass and numbered
per key by a rich MapFunction whose ValueState holds a Tally (a plain class) and whose ListState
holds the key's last readings. Prints one JSON line per reading: [sensor, count, total, last
amounts, whether the state came back as this program's own classes].
Usage: main_class_state.py N RATE [BACKEND]   (BACKEND: hashmap or rocksdb)
"""
import json
import sys
from dataclasses import dataclass

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors import DataGeneratorSource
from pyflink.datastream.functions import MapFunction, RuntimeContext
from pyflink.datastream.state import ListStateDescriptor, ValueStateDescriptor

SENSORS = 12


@dataclass(frozen=True)
class Sensor:
    site: str
    number: int


@dataclass
class Reading:
    sensor: Sensor
    amount: int


class Tally:
    def __init__(self, count, total):
        self.count = count
        self.total = total


class Numbering(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        self.tally = runtime_context.get_state(ValueStateDescriptor("tally", Types.PICKLED_BYTE_ARRAY()))
        self.last = runtime_context.get_list_state(ListStateDescriptor("last", Types.PICKLED_BYTE_ARRAY()))

    def map(self, reading):
        t = self.tally.value() or Tally(0, 0)
        own = isinstance(t, Tally) and all(isinstance(r, Reading) for r in self.last.get())
        t = Tally(t.count + 1, t.total + reading.amount)
        self.tally.update(t)
        self.last.update((list(self.last.get()) + [reading])[-3:])
        name = f"{reading.sensor.site}-{reading.sensor.number}"
        return json.dumps([name, t.count, t.total, [r.amount for r in self.last.get()], own])


N, RATE = int(sys.argv[1]), float(sys.argv[2])
backend = sys.argv[3] if len(sys.argv) > 3 else "hashmap"
env = StreamExecutionEnvironment.get_execution_environment()
if backend == "rocksdb":
    from pyflink.datastream.state_backend import EmbeddedRocksDBStateBackend

    env.set_state_backend(EmbeddedRocksDBStateBackend())


def reading(i):
    return Reading(Sensor("s%d" % (i % 2), i % SENSORS), i % 7)


source = DataGeneratorSource(reading, N, records_per_second=RATE)
readings = env.from_source(source, WatermarkStrategy.no_watermarks(), "readings").uid("readings")
numbered = readings.key_by(lambda r: r.sensor).map(Numbering()).uid("numbering")
for line in numbered.execute_and_collect("main class state"):
    print(line, flush=True)
