"""GlobalWindows with a CountTrigger, and the same with PurgingTrigger (fires cumulative vs fresh)."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.window import CountTrigger, GlobalWindows, PurgingTrigger


class Listing(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield f"{key}: {[e[1] for e in elements]}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("k", i) for i in range(1, 6)] + [("j", 100), ("j", 200)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
keyed = ds.key_by(lambda v: v[0], key_type=Types.STRING())
keyed.window(GlobalWindows.create()).trigger(CountTrigger.of(2)).process(Listing(), Types.STRING()).print("count")
keyed.window(GlobalWindows.create()).trigger(PurgingTrigger.of(CountTrigger.of(2))) \
    .process(Listing(), Types.STRING()).print("purging")
env.execute()
