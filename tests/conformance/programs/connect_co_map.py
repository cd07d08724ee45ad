"""connect() two streams of different types with a CoMapFunction and a CoFlatMapFunction."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import CoFlatMapFunction, CoMapFunction


class Describe(CoMapFunction):
    def map1(self, value):
        return f"number {value}"

    def map2(self, value):
        return f"word {value}"


class Spread(CoFlatMapFunction):
    def flat_map1(self, value):
        yield from [value] * value

    def flat_map2(self, value):
        for ch in value:
            yield ord(ch)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
numbers = env.from_collection([1, 2, 3], type_info=Types.INT())
words = env.from_collection(["hi", "yo"], type_info=Types.STRING())
numbers.connect(words).map(Describe(), output_type=Types.STRING()).print("map")
numbers.connect(words).flat_map(Spread(), output_type=Types.INT()).print("flat")
env.execute()
