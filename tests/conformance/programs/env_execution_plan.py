"""get_execution_plan(): the JSON plan's node contents, pacts and parallelism (ids left out)."""
import json

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
ds = env.from_collection([1, 2, 3], type_info=Types.INT())
ds.map(lambda x: x + 1, output_type=Types.INT()).name("plus one").key_by(lambda x: x % 2, key_type=Types.INT()) \
    .reduce(lambda a, b: a + b).name("sum").print()
plan = json.loads(env.get_execution_plan())
for node in plan["nodes"]:
    print(node["pact"], "|", node["contents"], "| parallelism", node["parallelism"],
          "| inputs", [i["ship_strategy"] for i in node.get("predecessors", node.get("inputs", []))])
