"""union() of KeyedStreams (as the receiver and as an argument): the records, and the plan PyFlink
builds for it, where each KeyedStream passes through its values map before the union."""
import json

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
a = env.from_collection([1, 2, 3], type_info=Types.INT())
b = env.from_collection([4, 5, 6], type_info=Types.INT())
a.key_by(lambda x: x % 2, key_type=Types.INT()).union(b.key_by(lambda x: x % 3, key_type=Types.INT())).print()
b.union(a.key_by(lambda x: x, key_type=Types.INT())).print()
plan = json.loads(env.get_execution_plan())
names = {n["id"]: n["contents"] for n in plan["nodes"]}
for node in plan["nodes"]:
    print(node["pact"], "|", node["contents"], "| parallelism", node["parallelism"], "| inputs",
          sorted((names[p["id"]], p["ship_strategy"]) for p in node.get("predecessors", [])))
