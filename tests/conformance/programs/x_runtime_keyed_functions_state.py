"""Rich map, flat_map, filter and reduce functions after key_by keep ValueState per key: a new key
starts from None (issue 12, item 1), at parallelism 2."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import FilterFunction, FlatMapFunction, MapFunction, ReduceFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor


class CountMap(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.INT()))

    def map(self, value):
        c = (self.count.value() or 0) + 1
        self.count.update(c)
        return f"map {value[0]} {value[1]} {c}"


class FirstSeen(FlatMapFunction):
    def open(self, runtime_context: RuntimeContext):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.STRING()))

    def flat_map(self, value):
        previous = self.seen.value()
        if previous is None:
            self.seen.update(value[1])
        yield f"flat_map {value[0]} {previous}"


class EveryOther(FilterFunction):
    def open(self, runtime_context: RuntimeContext):
        self.n = runtime_context.get_state(ValueStateDescriptor("n", Types.INT()))

    def filter(self, value):
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        return n % 2 == 1


class JoinCountingCalls(ReduceFunction):
    def open(self, runtime_context: RuntimeContext):
        self.calls = runtime_context.get_state(ValueStateDescriptor("calls", Types.INT()))

    def reduce(self, a, b):
        c = (self.calls.value() or 0) + 1
        self.calls.update(c)
        return (a[0], f"{a[1]}+{b[1]}#{c}")  # the input's shape: PyFlink keeps reduce results in its type


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
data = [("a", "x"), ("b", "y"), ("a", "z"), ("c", "w"), ("b", "v"), ("a", "u"), ("c", "t"), ("d", "s")]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.STRING()]))
mapped = ds.key_by(lambda v: v[0]).map(CountMap())
firsts = ds.key_by(lambda v: v[0]).flat_map(FirstSeen())
kept = ds.key_by(lambda v: v[0]).filter(EveryOther()).map(lambda v: f"filter {v[0]} {v[1]}")
reduced = ds.key_by(lambda v: v[0]).reduce(JoinCountingCalls()).map(lambda v: f"reduce {v}")
for line in mapped.union(firsts, kept, reduced).execute_and_collect():
    print(line)
