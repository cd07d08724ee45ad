"""Prints through print() sinks and from a user function, in STREAMING or BATCH mode (argv[1])."""
import sys

from pyflink.common import Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.functions import MapFunction

N = int(sys.argv[2]) if len(sys.argv) > 2 else 200


class Shout(MapFunction):
    def map(self, value):
        if value % 50 == 0:
            print(f"map saw {value}")
        return value * 10


env = StreamExecutionEnvironment.get_execution_environment()
if len(sys.argv) > 1 and sys.argv[1] == "batch":
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(2)
numbers = env.from_collection(list(range(N)), type_info=Types.INT())
numbers.map(Shout(), output_type=Types.INT()).print()
numbers.filter(lambda v: v % 40 == 0).map(lambda v: ("k%d" % (v % 3), v)).key_by(lambda t: t[0]).reduce(
    lambda a, b: (a[0], a[1] + b[1])
).print("sums")
env.execute("printing")
print("after execute")
