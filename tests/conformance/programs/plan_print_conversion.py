"""get_execution_plan() of print() sinks: PyFlink turns untyped (pickled) records and Rows into
strings with a Python map just before the print sink, and fuses it with the Python functions
before it; typed records print without one."""
import json

from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
ints = env.from_collection([1, 2, 3], type_info=Types.INT())
untyped = env.from_collection([(1, "a"), (2, "b")])
untyped.print()
untyped.map(lambda x: x[0]).print("untyped map")
ints.map(lambda x: x + 1, output_type=Types.INT()).print("typed map")
ints.map(lambda x: Row(x, str(x)), output_type=Types.ROW([Types.INT(), Types.STRING()])).print("rows")
ints.union(untyped.map(lambda x: x[0], output_type=Types.INT())).print("union")
untyped.key_by(lambda x: x[0]).print("keyed")
plan = json.loads(env.get_execution_plan())
names = {n["id"]: n["contents"] for n in plan["nodes"]}
for node in plan["nodes"]:
    print(node["pact"], "|", node["contents"], "| parallelism", node["parallelism"], "| inputs",
          sorted((names[p["id"]], p["ship_strategy"]) for p in node.get("predecessors", [])))
