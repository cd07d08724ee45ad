"""execute_and_collect on the outputs of keyed operators: a keyed process function yielding several
records per input, and a keyed map. (PyFlink cannot collect a KeyedStream itself: "The timer
service has not been initialized".)"""
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
print("map", sorted(map(str, keyed.map(lambda v: (v[0].upper(), v[1]), output_type=t).execute_and_collect())))
print("process", sorted(map(str, keyed.process(Twice(), output_type=t).execute_and_collect())))
