"""get_execution_plan() as PyFlink prints it, ids included, for key_by (PyFlink's key_by map takes an
id when key_by is called) and print() of untyped records and Rows (its conversion map takes one
before the sink's)."""
from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
words = env.from_collection([("a", 1), ("b", 2), ("a", 3)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
words.key_by(lambda w: w[0], key_type=Types.STRING()).reduce(lambda a, b: (a[0], a[1] + b[1])).print()
words.map(lambda w: w[1]).print()
words.map(lambda w: Row(w[0], w[1]), output_type=Types.ROW([Types.STRING(), Types.INT()])) \
    .key_by(lambda r: r[1], key_type=Types.INT()).map(lambda r: r, output_type=Types.ROW([Types.STRING(), Types.INT()])) \
    .print()
print(env.get_execution_plan())
