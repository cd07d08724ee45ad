"""Connecting two keyed streams whose declared key types differ is refused when the two-input
operator is added, with Flink's message; equal key types (or none on both sides) are accepted."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import CoMapFunction


class Values(CoMapFunction):
    def map1(self, value):
        return value[1]

    def map2(self, value):
        return value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
words = env.from_collection([("a", 1), ("b", 2)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
by_word = words.key_by(lambda w: w[0], key_type=Types.STRING())
pairs = [
    ("string and int", by_word, words.key_by(lambda w: w[1], key_type=Types.INT())),
    ("string and undeclared", by_word, words.key_by(lambda w: w[0])),
    ("string and string", by_word, words.key_by(lambda w: w[0], key_type=Types.STRING())),
    ("undeclared and undeclared", words.key_by(lambda w: w[0]), words.key_by(lambda w: w[1])),
]
for name, a, b in pairs:
    connected = a.connect(b)
    try:
        connected.map(Values(), output_type=Types.INT())
        print(name, "accepted")
    except Exception as e:
        message = str(e)
        print(name, "refused:", message[message.find("Key types"):].splitlines()[0])
