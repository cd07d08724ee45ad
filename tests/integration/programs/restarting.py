"""A job that fails on every attempt below RESTARTS and then finishes, restarting after 10 ms each time.

Usage: restarting.py RESTARTS P
"""
import sys

from pyflink.common import RestartStrategies
from pyflink.datastream import MapFunction, StreamExecutionEnvironment

RESTARTS, P = int(sys.argv[1]), int(sys.argv[2])


class FailUntil(MapFunction):
    def open(self, runtime_context):
        self.attempt = runtime_context.get_attempt_number()

    def map(self, value):
        if self.attempt < RESTARTS:
            raise RuntimeError(f"attempt {self.attempt} fails on purpose")
        return value


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(P)
env.set_restart_strategy(RestartStrategies.fixed_delay_restart(RESTARTS + 1, 10))
(env.from_collection(list(range(100))).rebalance().map(FailUntil())
 .key_by(lambda x: x % 4).reduce(lambda a, b: a + b).filter(lambda x: False).print())
env.execute("restarting job")
print("finished", flush=True)
