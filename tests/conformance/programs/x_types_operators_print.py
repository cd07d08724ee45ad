"""What print() writes after each operator, with and without output_type: the declared type decides."""
from pyflink.common import Row, Types
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, ProcessFunction, ProcessWindowFunction

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
T = Types.TUPLE([Types.STRING(), Types.INT()])
R = Types.ROW_NAMED(["word", "n"], [Types.STRING(), Types.INT()])
data = [("a", 1), ("b", 2), ("a", 3)]


def side_tag():
    # Built where used: a PyFlink OutputTag or type that has met the JVM cannot be pickled.
    return OutputTag("side", Types.TUPLE([Types.STRING(), Types.INT()]))


class Pass(ProcessFunction):
    def process_element(self, value, ctx):
        yield value
        yield side_tag(), value


class Plain(ProcessFunction):
    def process_element(self, value, ctx):
        yield value


class KeyedPass(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value


class Total(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield key, sum(e[1] for e in elements)


def src(t=T):
    return env.from_collection(data, type_info=t)


src().map(lambda x: x).print("map")
src().map(lambda x: x, output_type=T).print("map_t")
src().map(lambda x: x[1], output_type=Types.DOUBLE()).print("map_double")
src().map(lambda x: x[1] / 10, output_type=Types.FLOAT()).print("map_float")
src().map(lambda x: [x[0]], output_type=Types.LIST(Types.STRING())).print("map_list")
src().map(lambda x: Row(x[0], x[1])).print("map_row")
src().map(lambda x: Row(w=x[0], n=x[1])).print("map_named")
src(R).map(lambda r: r.word + str(r.n)).print("fields")
src().flat_map(lambda x: [x, x]).print("flat")
src().flat_map(lambda x: [x], output_type=T).print("flat_t")
src().filter(lambda x: x[1] > 1).print("filter")
env.from_collection(data).filter(lambda x: x[1] > 1).print("filter_untyped")
src().key_by(lambda x: x[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).print("reduce")
env.from_collection(data).key_by(lambda x: x[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).print("reduce_untyped")
src().key_by(lambda x: x[0]).sum(1).print("sum")
src(R).key_by(lambda x: x[0]).sum(1).print("sum_row")
src().key_by(lambda x: x[0]).max(1).print("max")
processed = src().process(Pass(), output_type=T)
processed.print("process_t")
processed.get_side_output(side_tag()).print("side")
src().process(Plain()).print("process")
src().key_by(lambda x: x[0]).process(KeyedPass()).print("keyed_process")
src().key_by(lambda x: x[0]).process(KeyedPass(), output_type=T).print("keyed_process_t")
src().key_by(lambda x: x[0]).filter(lambda x: True).print("keyed_filter")
src().key_by(lambda x: x[0]).count_window(1).reduce(lambda a, b: (a[0], a[1] + b[1])).print("window_reduce")
src().key_by(lambda x: x[0]).count_window(1).process(Total()).print("window_process")
src().key_by(lambda x: x[0]).count_window(1).process(Total(), output_type=T).print("window_process_t")
src().union(src()).print("union")
src().key_by(lambda x: x[0]).print("keyed_ident_dropped")
env.execute()
