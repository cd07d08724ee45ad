"""flat_map with a generator and an output_type of TUPLE(STRING, INT); then map to STRING."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment


def split(line):
    for word in line.split():
        yield word, len(word)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
lines = env.from_collection(["to be or", "not to be"], type_info=Types.STRING())
pairs = lines.flat_map(split, output_type=Types.TUPLE([Types.STRING(), Types.INT()]))
pairs.print()
pairs.map(lambda t: f"{t[0]}:{t[1]}", output_type=Types.STRING()).print()
env.execute()
