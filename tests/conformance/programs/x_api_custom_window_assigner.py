"""A window assigner and triggers written against PyFlink's API: assign_windows(element, timestamp,
context), is_event_time(), get_default_trigger(env), a merging assigner with merge_windows(windows,
callback), and triggers keeping per-window state with get_partitioned_state / merge_partitioned_state."""
from typing import Collection, Iterable

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.state import ReducingStateDescriptor
from pyflink.datastream.window import (
    MergingWindowAssigner,
    TimeWindow,
    TimeWindowSerializer,
    Trigger,
    TriggerResult,
    WindowAssigner,
)

COUNT = ReducingStateDescriptor("count", lambda a, b: a + b, Types.LONG())


class Stamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class EveryTwoOrEnd(Trigger):
    """Fires when a window has two elements, and at its end."""

    def on_element(self, element, timestamp, window, ctx: Trigger.TriggerContext) -> TriggerResult:
        ctx.register_event_time_timer(window.max_timestamp())
        count = ctx.get_partitioned_state(COUNT)
        count.add(1)
        if count.get() == 2:
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(COUNT)
        ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window, ctx) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())
        ctx.get_partitioned_state(COUNT).clear()


class Buckets(WindowAssigner):
    """Tumbling 1000 ms windows, PyFlink style."""

    def assign_windows(self, element, timestamp: int, context: WindowAssigner.WindowAssignerContext) -> Collection[TimeWindow]:
        start = timestamp - timestamp % 1000
        return [TimeWindow(start, start + 1000)]

    def get_default_trigger(self, env) -> Trigger:
        return EveryTwoOrEnd()

    def get_window_serializer(self):
        return TimeWindowSerializer()

    def is_event_time(self) -> bool:
        return True


class Sessions(MergingWindowAssigner):
    """Sessions with a 100 ms gap, PyFlink style."""

    def merge_windows(self, windows: Iterable[TimeWindow], callback: MergingWindowAssigner.MergeCallback) -> None:
        TimeWindow.merge_windows(windows, callback)

    def assign_windows(self, element, timestamp: int, context) -> Collection[TimeWindow]:
        return [TimeWindow(timestamp, timestamp + 100)]

    def get_default_trigger(self, env) -> Trigger:
        return EveryTwoOrEnd()

    def get_window_serializer(self):
        return TimeWindowSerializer()

    def is_event_time(self) -> bool:
        return True


class Show(ProcessWindowFunction):
    def __init__(self, label):
        self.label = label

    def process(self, key, context, elements):
        w = context.window()
        yield f"{self.label} {key} [{w.start}, {w.end}) {sorted(e[1] for e in elements)}"


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", 10), ("a", 20), ("a", 30), ("b", 50), ("a", 1100), ("b", 120), ("b", 180), ("a", 1500)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.LONG()])).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Stamp())
)
keyed = ds.key_by(lambda v: v[0], key_type=Types.STRING())
keyed.window(Buckets()).process(Show("buckets"), Types.STRING()).print()
keyed.window(Sessions()).process(Show("sessions"), Types.STRING()).print()
env.execute("custom_window_assigner")
