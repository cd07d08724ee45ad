"""Rolling sum/min/max/min_by/max_by addressed by field name on ROW_NAMED records."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.ROW_NAMED(["word", "count", "score"], [Types.STRING(), Types.INT(), Types.INT()])
data = [("a", 1, 5), ("b", 2, 3), ("a", 4, 1), ("a", 2, 9), ("b", 7, 2)]
ds = env.from_collection(data, type_info=t)
ds.key_by(lambda r: r.word, key_type=Types.STRING()).sum("count").print("sum")
ds.key_by(lambda r: r.word, key_type=Types.STRING()).min_by("score").print("min_by")
ds.key_by(lambda r: r.word, key_type=Types.STRING()).max_by("score").print("max_by")
env.execute()
