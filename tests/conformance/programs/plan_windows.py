"""get_execution_plan() for window operators: PyFlink names each by its assigner and describes it as
Window(assigner, trigger, function). (Only the plan is printed, so no timestamps are assigned: PyFlink
plans a Python TimestampAssigner as three nodes, and window_all at the default parallelism, which
Millstream does not do yet.)"""
from typing import Iterable

from pyflink.common import Time, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import AggregateFunction, ProcessWindowFunction
from pyflink.datastream.window import (CountTrigger, EventTimeSessionWindows, GlobalWindows, PurgingTrigger,
                                       SlidingProcessingTimeWindows, TumblingEventTimeWindows)


class Count(ProcessWindowFunction):
    def process(self, key, context: ProcessWindowFunction.Context, elements: Iterable[tuple]):
        yield len(list(elements))


class Total(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value[1]

    def get_result(self, accumulator):
        return accumulator

    def merge(self, acc_a, acc_b):
        return acc_a + acc_b


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
data = env.from_collection([("a", 1), ("b", 2), ("a", 7)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
keyed = data.key_by(lambda x: x[0], key_type=Types.STRING())
keyed.window(TumblingEventTimeWindows.of(Time.milliseconds(5))).process(Count(), Types.INT()).print()
keyed.window(SlidingProcessingTimeWindows.of(Time.seconds(10), Time.seconds(5))) \
    .aggregate(Total(), Count(), output_type=Types.INT()).print()
keyed.window(EventTimeSessionWindows.with_gap(Time.milliseconds(3))) \
    .reduce(lambda a, b: (a[0], a[1] + b[1]), output_type=Types.TUPLE([Types.STRING(), Types.INT()])).print()
keyed.window(GlobalWindows.create()).trigger(PurgingTrigger.of(CountTrigger.of(2))).process(Count(), Types.INT()).print()
print(env.get_execution_plan())
