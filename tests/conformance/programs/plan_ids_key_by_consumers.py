"""get_execution_plan() ids when key_by streams have several consumers, a count window, or are
connected: PyFlink takes one transformation id per key_by while it builds the plan, so the fused
operators' ids come after them."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import CoMapFunction


class Values(CoMapFunction):
    def map1(self, value):
        return value[1]

    def map2(self, value):
        return value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
words = env.from_collection([("a", 1), ("b", 2), ("a", 3)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
keyed = words.key_by(lambda w: w[0], key_type=Types.STRING())
keyed.reduce(lambda a, b: (a[0], a[1] + b[1])).print()
keyed.map(lambda w: w[1], output_type=Types.INT()).print()
words.key_by(lambda w: w[0], key_type=Types.STRING()).count_window(2) \
    .reduce(lambda a, b: (a[0], a[1] + b[1]), output_type=Types.TUPLE([Types.STRING(), Types.INT()])).print()
left = words.key_by(lambda w: w[0], key_type=Types.STRING())
right = words.map(lambda w: (w[0], w[1] * 10), output_type=Types.TUPLE([Types.STRING(), Types.INT()])) \
    .key_by(lambda w: w[0], key_type=Types.STRING())
left.connect(right).map(Values(), output_type=Types.INT()).print()
words.map(lambda w: w[1]).filter(lambda v: v > 1).print()
print(env.get_execution_plan())
