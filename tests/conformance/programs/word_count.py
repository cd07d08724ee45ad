"""The classic word count: flat_map to (word, 1), key_by, sum; printed as a rolling count."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

text = ["the quick brown fox", "jumps over the lazy dog", "the dog sleeps"]
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
ds = env.from_collection(text, type_info=Types.STRING())
counts = ds.flat_map(lambda line: [(w, 1) for w in line.split()],
                     output_type=Types.TUPLE([Types.STRING(), Types.INT()])) \
    .key_by(lambda t: t[0]) \
    .reduce(lambda a, b: (a[0], a[1] + b[1]))
counts.print()
env.execute("word_count")
