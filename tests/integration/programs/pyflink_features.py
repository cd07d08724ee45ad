"""Many DataStream features through the pyflink import path; prints one JSON object of results."""
import json

from pyflink.common import Types
from pyflink.datastream import (
    FlatMapFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
)
from pyflink.datastream.state import ValueStateDescriptor


class Tokenize(FlatMapFunction):
    def flat_map(self, value):
        for word in value.split():
            yield word, 1


class Upper(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        self.subtasks = runtime_context.get_number_of_parallel_subtasks()

    def map(self, value):
        return value[0].upper(), value[1]


class Dedup(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", Types.BOOLEAN()))

    def process_element(self, value, ctx):
        if not self.seen.value():
            self.seen.update(True)
            yield ctx.get_current_key()


class Evens(ProcessFunction):
    def process_element(self, value, ctx):
        if value % 2 == 0:
            yield value


def collect(stream, name):
    return sorted(stream.execute_and_collect(name))


env = StreamExecutionEnvironment.get_execution_environment()
out = {}
lines = ["a b c a", "b c d", "a a e"]
words = env.from_collection(lines).flat_map(Tokenize(), output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
out["wordcount"] = collect(words.key_by(lambda t: t[0]).sum(1).filter(lambda t: t[1] >= 1), "wc")
env = StreamExecutionEnvironment.get_execution_environment()
words = env.from_collection(lines).flat_map(Tokenize()).rebalance().map(Upper())
out["dedup"] = collect(words.key_by(lambda t: t[0]).process(Dedup()), "dedup")
env = StreamExecutionEnvironment.get_execution_environment()
a = env.from_collection([1, 2, 3, 4])
b = env.from_collection([10, 20, 30])
out["union"] = collect(a.union(b).rescale().map(lambda x: x * 2), "union")
env = StreamExecutionEnvironment.get_execution_environment()
pairs = env.from_collection([("x", 5), ("y", 1), ("x", 2), ("y", 9), ("x", 7)])
out["max"] = collect(pairs.key_by(lambda t: t[0]).max(1), "max")
env = StreamExecutionEnvironment.get_execution_environment()
out["shuffled_evens"] = collect(env.from_collection(list(range(20))).shuffle().process(Evens()), "evens")
env = StreamExecutionEnvironment.get_execution_environment()
out["broadcast"] = collect(env.from_collection([1, 2]).broadcast().map(lambda x: x), "broadcast")
print(json.dumps(out))
