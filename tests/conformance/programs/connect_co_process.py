"""A non-keyed CoProcessFunction with a side output from each input."""
from pyflink.common import Types
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import CoProcessFunction

long_words = OutputTag("long", Types.STRING())


class Merge(CoProcessFunction):
    def process_element1(self, value, ctx):
        yield f"left {value}"
        if value > 1:
            yield long_words, f"big number {value}"

    def process_element2(self, value, ctx):
        if len(value) > 3:
            yield long_words, value
        else:
            yield f"right {value}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
left = env.from_collection([1, 2], type_info=Types.INT())
right = env.from_collection(["ab", "abcd", "xyz"], type_info=Types.STRING())
merged = left.connect(right).process(Merge(), output_type=Types.STRING())
merged.print("main")
merged.get_side_output(long_words).print("side")
env.execute()
