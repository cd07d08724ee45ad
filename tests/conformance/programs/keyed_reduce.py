"""key_by + reduce with a ReduceFunction class, results collected."""
# conformance: ordered
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ReduceFunction


class Longest(ReduceFunction):
    def reduce(self, a, b):
        return (a[0], a[1] + " " + b[1]) if len(b[1]) >= len(a[1]) else (a[0], a[1])


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.INT(), Types.STRING()])
ds = env.from_collection([(1, "x"), (2, "yy"), (1, "zzz"), (2, "w"), (1, "vv")], type_info=t)
for v in ds.key_by(lambda v: v[0], key_type=Types.INT()).reduce(Longest()).execute_and_collect():
    print(v)
