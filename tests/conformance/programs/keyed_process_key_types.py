"""ctx.get_current_key() for int, string and tuple keys (with and without key_type)."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction


class ShowKey(KeyedProcessFunction):
    def process_element(self, value, ctx):
        key = ctx.get_current_key()
        yield f"{value} key={key!r} type={type(key).__name__}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.INT()])
ds = env.from_collection([("a", 1), ("b", 2)], type_info=t)
ds.key_by(lambda v: v[1], key_type=Types.INT()).process(ShowKey(), Types.STRING()).print("int")
ds.key_by(lambda v: v[0]).process(ShowKey(), Types.STRING()).print("str")
ds.key_by(lambda v: (v[0], v[1])).process(ShowKey(), Types.STRING()).print("tuple")
env.execute()
