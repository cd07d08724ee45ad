"""MAP type info and ROWs nesting a ROW, a LIST and a MAP: printed and collected."""
from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
counts = env.from_collection([{"a": 1}, {}], type_info=Types.MAP(Types.STRING(), Types.INT()))
counts.print("map")
inner = Types.ROW_NAMED(["x", "y"], [Types.INT(), Types.INT()])
outer = Types.ROW_NAMED(["id", "point", "tags"], [Types.STRING(), inner, Types.LIST(Types.STRING())])
nested = env.from_collection([("p1", Row(x=1, y=2), ["red", "big"]), ("p2", Row(x=-1, y=0), [])], type_info=outer)
nested.print("nested")
env.execute()
for r in nested.execute_and_collect():
    print("collected", r, r.point.x + r.point.y, list(r.tags))
