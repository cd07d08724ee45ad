"""Frozen dataclass records defined in the program: flat_map produces them, a keyed process
function reads them, execute_and_collect returns them as dataclass instances."""
from dataclasses import dataclass

from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction


@dataclass(frozen=True)
class Word:
    text: str
    line: int


class FirstSeen(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield Word(value.text.upper(), value.line)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
lines = env.from_collection(["a b", "b c", "c a"])
words = lines.flat_map(lambda line: [Word(w, len(line)) for w in line.split()])
for w in words.key_by(lambda w: w.text).process(FirstSeen()).execute_and_collect():
    print(w, isinstance(w, Word))
