"""execute_and_collect of typed streams: lists, byte arrays, maps, floats, nested rows and tuples; limit."""
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


with env.from_collection(data, type_info=T).map(lambda x: [x[0]], output_type=Types.LIST(Types.STRING())).execute_and_collect() as it:
    show("list_t", it)
with env.from_collection(data, type_info=T).map(lambda x: x[0].encode(), output_type=Types.PRIMITIVE_ARRAY(Types.BYTE())).execute_and_collect() as it:
    show("bytes_t", it)
with env.from_collection(data, type_info=T).map(lambda x: {x[0]: x[1]}, output_type=Types.MAP(Types.STRING(), Types.INT())).execute_and_collect() as it:
    show("map_t", it)
with env.from_collection([0.1, 1.5], type_info=Types.FLOAT()).execute_and_collect() as it:
    show("float", it)
with env.from_collection([Row("a", Row(1, [1, 2]))], type_info=Types.ROW([Types.STRING(), Types.ROW([Types.INT(), Types.LIST(Types.INT())])])).execute_and_collect() as it:
    show("row_nested", it)
with env.from_collection([("a", (1, [1, 2]))], type_info=Types.TUPLE([Types.STRING(), Types.TUPLE([Types.INT(), Types.LIST(Types.INT())])])).execute_and_collect() as it:
    show("tuple_nested", it)
limited = env.from_collection(list(range(10)), type_info=Types.INT()).execute_and_collect(limit=3)
print("limit", type(limited).__name__, limited)
