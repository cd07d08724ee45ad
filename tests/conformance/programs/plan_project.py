"""get_execution_plan() around project(): PyFlink runs the projection as a Java operator, so it is
never fused with the Python functions before or after it (they still fuse with each other)."""
import json

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
t4 = Types.TUPLE([Types.INT(), Types.INT(), Types.INT(), Types.INT()])
ds = env.from_collection([(1, 2, 3, 4), (5, 6, 7, 8)], type_info=t4)
ds.map(lambda x: x, output_type=t4).project(3, 1) \
    .map(lambda x: (x[0], x[1] + 1), output_type=Types.TUPLE([Types.INT(), Types.INT()])) \
    .filter(lambda x: x[0] > 0).print()
plan = json.loads(env.get_execution_plan())
names = {n["id"]: n["contents"] for n in plan["nodes"]}
for node in plan["nodes"]:
    print(node["pact"], "|", node["contents"], "| parallelism", node["parallelism"], "| inputs",
          [(names[p["id"]], p["ship_strategy"]) for p in node.get("predecessors", [])])
