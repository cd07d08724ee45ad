"""Count windows of three elements per key with reduce (a final partial window never fires)."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [(k, i) for i, k in enumerate("aabababbaab")]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
ds.key_by(lambda v: v[0], key_type=Types.STRING()).count_window(3) \
    .reduce(lambda a, b: (a[0], a[1] + b[1])).print()
env.execute()
