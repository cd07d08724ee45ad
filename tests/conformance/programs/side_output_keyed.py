"""Side outputs from a KeyedProcessFunction, the side stream keyed again and reduced."""
from pyflink.common import Types
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction

rejected = OutputTag("rejected", Types.TUPLE([Types.STRING(), Types.INT()]))


class Limit(KeyedProcessFunction):
    def process_element(self, value, ctx):
        if value[1] > 10:
            yield rejected, value
        else:
            yield f"{ctx.get_current_key()} ok {value[1]}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", 5), ("a", 50), ("b", 7), ("b", 70), ("a", 20)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
checked = ds.key_by(lambda v: v[0]).process(Limit(), output_type=Types.STRING())
checked.print("ok")
checked.get_side_output(rejected).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).print("rejected")
env.execute()
