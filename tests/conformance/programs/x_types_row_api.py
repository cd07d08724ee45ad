"""pyflink.common.Row's behaviour: repr, equality, kinds, factory, field access, as_dict."""
from pyflink.common import Row, Types
from pyflink.common.types import RowKind
from pyflink.datastream import StreamExecutionEnvironment

r = Row(name="Alice", age=11)
print(repr(r), str(r), r.name, r["age"], r[0], "name" in r, "x" in r)
p = Row(1, "a")
print(repr(p), p == Row(1, "a"), p == (1, "a"), isinstance(p, tuple), len(p), list(p))
print(Row(a=1, b=2) == Row(b=2, a=1), Row(a=1) == Row(1), hash(Row(1, 2)) == hash((1, 2)))
Person = Row("name", "age")
print(repr(Person), repr(Person("Bob", 3)), Person("Bob", 3).age)
k = Row.of_kind(RowKind.DELETE, 1)
print(k.get_row_kind(), k == Row(1), [str(x) for x in RowKind])
k.set_row_kind(RowKind.UPDATE_AFTER)
print(k.get_row_kind(), k._is_accumulate_msg(), k._is_retract_msg())
nested = Row(key=1, value=Row(name="a", age=2))
print(nested.as_dict(), nested.as_dict(True))
m = Row(1, 2)
m[0] = 5
m.set_field_names(["x", "y"])
print(repr(m), m.x, m.get_fields_by_names(["y", "x"]))

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
rows = env.from_collection([("a", 1)], type_info=Types.ROW_NAMED(["w", "n"], [Types.STRING(), Types.INT()]))
rows.map(lambda row: f"{row!r} {row.w} {row['n']} {row.get_row_kind()} {row.as_dict()}").print()
env.execute()
