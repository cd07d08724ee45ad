"""What a window function sees as its window for tumbling and sliding count windows, keyed and
all-windowed: PyFlink's count windows are CountWindow(id) objects, one id per window."""
from typing import Iterable

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessAllWindowFunction, ProcessWindowFunction
from pyflink.datastream.window import CountTumblingWindowAssigner


class ShowWindow(ProcessWindowFunction):
    def process(self, key, context: ProcessWindowFunction.Context, elements: Iterable[tuple]):
        w = context.window()
        yield f"{key} {w} max={w.max_timestamp()} {[e[1] for e in elements]}"


class ShowAllWindow(ProcessAllWindowFunction):
    def process(self, context: ProcessAllWindowFunction.Context, elements: Iterable[tuple]):
        yield f"all {context.window()} {sorted(e[1] for e in elements)}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = env.from_collection([("a", i) for i in range(7)] + [("b", i) for i in range(4)],
                           type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
data.key_by(lambda x: x[0], key_type=Types.STRING()).count_window(3) \
    .process(ShowWindow(), Types.STRING()).print()
data.key_by(lambda x: x[0], key_type=Types.STRING()).count_window(3, 2) \
    .process(ShowWindow(), Types.STRING()).print()
data.window_all(CountTumblingWindowAssigner.of(4)).process(ShowAllWindow(), Types.STRING()).print()
env.execute("count_window_window_object")
