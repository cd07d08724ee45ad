"""get_execution_plan() of window_all at parallelism 2 (PyFlink keys the stream by a constant and plans
the window at the default parallelism), after timestamps assigned in Python and after none, with a
function following it."""
from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessAllWindowFunction
from pyflink.datastream.window import CountTrigger, GlobalWindows, TumblingEventTimeWindows


class ByValue(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value


class Count(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield len(list(elements))


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
ds = env.from_collection([1, 7, 3], type_info=Types.LONG())
timed = ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByValue()))
timed.window_all(TumblingEventTimeWindows.of(Time.milliseconds(5))).process(Count(), Types.INT()).print()
ds.window_all(GlobalWindows.create()).trigger(CountTrigger.of(2)).reduce(lambda a, b: a + b).map(lambda x: x * 2, Types.LONG()).print()
print(env.get_execution_plan())
