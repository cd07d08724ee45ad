"""key_by routing at parallelism 3: which subtask (the print() prefix) each key lands on, for keys
without a key_type (pickled: str, int, float, bytes, None, tuples) and with one (STRING, INT, LONG,
BOOLEAN, DOUBLE, FLOAT, TUPLE, ROW). Each record is (index, key); the map prints the index only."""
from pyflink.common import Row, Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(3)


def route(name, keys, key_type=None):
    data = list(enumerate(keys))
    if key_type is None:
        ds = env.from_collection(data)
        keyed = ds.key_by(lambda v: v[1])
    else:
        ds = env.from_collection(data, type_info=Types.TUPLE([Types.INT(), key_type]))
        keyed = ds.key_by(lambda v: v[1], key_type=key_type)
    keyed.map(lambda v, n=name: f"{n} {v[0]}", output_type=Types.STRING()).print()


words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "", "straße", "日本", "😀"]
route("pickled-str", words)
route("pickled-int", [0, 1, -1, 7, 42, 1000, 2**31, -(2**31) - 1, 2**40, 2**63 - 1, -(2**63), 10**20])
route("pickled-other", [1.5, -0.25, 1e100, b"ab", b"", None, ("a", 1), (1, 2, 3), ("x", ("y", 2)), ("k", None)])
route("string", words + ["a", "b", "c", "d", "e", "f", "g", "h"], Types.STRING())
route("int", [-5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 2**31 - 1, -(2**31)], Types.INT())
route("long", [0, -1, 7, 2**31, -(2**31) - 1, 2**40, -(2**40), 2**63 - 1, -(2**63)], Types.LONG())
route("boolean", [True, False], Types.BOOLEAN())
route("double", [1.5, 0.0, 2.0, -7.25, 1e100, 0.1], Types.DOUBLE())
route("float", [1.5, 0.0, 2.0, -7.25, 0.1], Types.FLOAT())
route("tuple", [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("", 0), ("日本", -1)], Types.TUPLE([Types.STRING(), Types.INT()]))
route("row", [Row("a", 1), Row("b", 2), Row("c", 3), Row("d", 4), Row("", 0)], Types.ROW([Types.STRING(), Types.INT()]))
env.execute("keyed_routing_key_types")
