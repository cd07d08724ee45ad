"""execute_and_collect of untyped tuple records holding lists, nested lists and a bytearray, after a
map across an exchange (from_collection at parallelism 1, the map at 2): PyFlink pickles such
records, so they come back as the program made them."""
# conformance: ordered
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
data = [(1, [1, 2], bytearray(b"ab"), [["x"], ["y", "z"]], {"k": [3]}), (2, [], bytearray(b""), [[]], {})]
with env.from_collection(data).map(lambda r: r).execute_and_collect() as results:
    for r in sorted(results, key=lambda r: r[0]):
        print(repr(r), [type(x).__name__ for x in r])
