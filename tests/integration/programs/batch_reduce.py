"""BATCH mode: a keyed reduce emits only the final value per key."""
import json

from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
data = env.from_collection([("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("a", 6)] * 50)
total = data.rebalance().key_by(lambda t: t[0]).sum(1)
print(json.dumps(sorted(total.execute_and_collect("batch reduce"))))
