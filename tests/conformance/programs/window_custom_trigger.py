"""A Trigger subclass written in the program: fires and purges a window when a marker element arrives."""
from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.window import GlobalWindows, Trigger, TriggerResult


class OnMarker(Trigger):
    def on_element(self, element, timestamp, window, ctx):
        return TriggerResult.FIRE_AND_PURGE if element[1] == "!" else TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx):
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx):
        return TriggerResult.CONTINUE

    def on_merge(self, window, ctx):
        pass

    def clear(self, window, ctx):
        pass


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [(1, "a"), (1, "b"), (2, "x"), (1, "!"), (2, "!"), (1, "c"), (1, "!"), (2, "y")]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.INT(), Types.STRING()]))
ds.key_by(lambda v: v[0], key_type=Types.INT()).window(GlobalWindows.create()).trigger(OnMarker()) \
    .reduce(lambda a, b: (a[0], a[1] + b[1])).print()
env.execute()
