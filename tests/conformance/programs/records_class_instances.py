"""Records that are instances of a class defined in the program, keyed by an attribute and reduced."""
from pyflink.datastream import StreamExecutionEnvironment


class Reading:
    def __init__(self, sensor, value):
        self.sensor = sensor
        self.value = value

    def __repr__(self):
        return f"Reading({self.sensor!r}, {self.value})"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([("s1", 3), ("s2", 5), ("s1", 4), ("s2", 1), ("s1", 10)])
readings = ds.map(lambda t: Reading(*t))
top = readings.key_by(lambda r: r.sensor).reduce(lambda a, b: a if a.value >= b.value else b)
for r in top.execute_and_collect():
    print(type(r).__name__, r.sensor, r.value)
readings.filter(lambda r: r.value > 3).map(lambda r: repr(r)).print()
env.execute()
