"""execute_and_collect: records come back as the stream's declared type; keyed streams as Rows."""
from decimal import Decimal

from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
T = Types.TUPLE([Types.STRING(), Types.INT()])
R = Types.ROW_NAMED(["word", "n"], [Types.STRING(), Types.INT()])
data = [("a", 1), ("b", 2), ("a", 3)]


def show(label, records):
    for r in records:
        extra = f" kind={r.get_row_kind()}" if isinstance(r, Row) else ""
        print(label, type(r).__name__, repr(r), extra)


with env.from_collection([1, "a", (1, 2), [1, 2], {"a": 1}, None, 1.5, Row(1, "a"), Row(x=1), b"ab",
                          bytearray(b"x"), {1, 2}, Decimal("3")]).execute_and_collect() as it:
    show("untyped", it)
with env.from_collection([["a", 1]], type_info=T).execute_and_collect() as it:
    show("tuple", it)
with env.from_collection([("a", 1)], type_info=Types.ROW([Types.STRING(), Types.INT()])).execute_and_collect() as it:
    show("row", it)
with env.from_collection(data, type_info=R).execute_and_collect() as it:
    show("named", it)
with env.from_collection(data, type_info=T).key_by(lambda x: x[0], key_type=Types.STRING()).execute_and_collect() as it:
    show("keyed", it)
with env.from_collection(data, type_info=T).key_by(lambda x: x[0]).execute_and_collect() as it:
    show("keyed_untyped_key", it)
with env.from_collection(data, type_info=T).map(lambda x: [x[0], x[1]]).execute_and_collect() as it:
    show("list", it)
with env.from_collection(data, type_info=T).map(lambda x: bytearray(x[0].encode())).execute_and_collect() as it:
    show("bytearray", it)
