"""ROW_NAMED type info: fields read by name in a map, and rows printed and collected."""
# conformance: ordered
from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
person = Types.ROW_NAMED(["name", "age"], [Types.STRING(), Types.INT()])
ds = env.from_collection([("alice", 31), ("bob", 25)], type_info=person)
older = ds.map(lambda r: Row(name=r.name, age=r.age + 1), output_type=person)
older.print()
env.execute()
for r in ds.map(lambda r: Row(name=r["name"].title(), age=r["age"]), output_type=person).execute_and_collect():
    print("collected", r, r.name, r.age, r.as_dict())
