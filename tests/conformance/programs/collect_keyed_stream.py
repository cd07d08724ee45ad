"""execute_and_collect called directly on a KeyedStream, and on a keyed stream's process output
that yields several records per input."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction


class Twice(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value
        yield value[0], value[1] * -1


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
t = Types.TUPLE([Types.STRING(), Types.INT()])
keyed = env.from_collection([("a", 1), ("b", 2), ("a", 3)], type_info=t).key_by(lambda v: v[0])
print("keyed", sorted(map(str, keyed.execute_and_collect())))
print("process", sorted(map(str, keyed.process(Twice(), output_type=t).execute_and_collect())))
