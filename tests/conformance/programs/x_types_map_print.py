"""print() of MAP streams: Java's HashMap order (int, string and long keys, more than 12 entries,
a map inside a tuple)."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
S, I, L = Types.STRING(), Types.INT(), Types.LONG()
env.from_collection([{3: "c", 1: "a", 20: "t", 17: "q"}], type_info=Types.MAP(I, S)).print("ints")
env.from_collection([{f"k{i}": i for i in range(20)}], type_info=Types.MAP(S, I)).print("many")
env.from_collection([{2**40: 1, -7: 2, 5: 3}], type_info=Types.MAP(L, I)).print("longs")
env.from_collection([{"apple": 1, "Banana": 2, "cherry": 3}], type_info=Types.MAP(S, I)).print("words")
env.from_collection([("t", {"b": 2, "a": 1, "q": 17})], type_info=Types.TUPLE([S, Types.MAP(S, I)])).print("tuple")
env.from_collection(["x", "y"], type_info=S).map(
    lambda s: {s + "2": 2, s + "1": 1, "zz": 0}, output_type=Types.MAP(S, I)).print("mapped")
env.execute()
