"""Window assigners with PyFlink's names (``pyflink.datastream.window``)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable

from millstream.engine.common.time import Duration, Time
from millstream.engine.windowing.triggers import CountTrigger, EventTimeTrigger, ProcessingTimeTrigger, Trigger
from millstream.engine.windowing.windows import CountWindow, GlobalWindow, TimeWindow, merge_time_windows


def _ms(t: Time | Duration | int) -> int:
    return t if isinstance(t, int) else t.to_milliseconds()


class _WindowAssignerContext(ABC):
    """PyFlink's ``WindowAssigner.WindowAssignerContext``, handed to assigners written for PyFlink."""

    @abstractmethod
    def get_current_processing_time(self) -> int: ...

    @abstractmethod
    def get_runtime_context(self) -> Any: ...


class WindowAssigner:
    """Places an element in windows. Millstream's protocol: ``assign_windows(element, timestamp)``,
    ``is_event_time``/``is_merging`` attributes; assigners written for PyFlink (``assign_windows(element,
    timestamp, context)``, ``is_event_time()``) are adapted by ``millstream.engine.windowing.user_assigners``."""

    is_event_time = True
    is_merging = False
    WindowAssignerContext = _WindowAssignerContext

    def get_window_serializer(self) -> Any:
        # Windows are pickled; PyFlink's serializer classes are accepted markers.
        from millstream.engine.windowing.windows import TimeWindowSerializer

        return TimeWindowSerializer()

    def assign_windows(self, element: Any, timestamp: int) -> list[Any]:
        raise NotImplementedError

    def get_default_trigger(self) -> Trigger:
        return EventTimeTrigger.create() if self.is_event_time else ProcessingTimeTrigger.create()

    def merge_windows(self, windows: list[Any]) -> list[tuple[Any, list[Any]]]:
        return [(w, [w]) for w in windows]


class _MergeCallback(ABC):
    """PyFlink's ``MergingWindowAssigner.MergeCallback``: ``merge(to_be_merged, merge_result)``."""

    @abstractmethod
    def merge(self, to_be_merged: Any, merge_result: Any) -> None: ...


class MergingWindowAssigner(WindowAssigner):
    """An assigner whose windows merge (sessions): ``merge_windows`` says which fuse."""

    is_merging = True
    MergeCallback = _MergeCallback


class SessionWindowTimeGapExtractor(ABC):
    """Gives the session gap (ms) for an element: ``with_dynamic_gap(extractor)``."""

    @abstractmethod
    def extract(self, element: Any) -> int: ...


class TumblingEventTimeWindows(WindowAssigner):
    def __init__(self, size: int, offset: int = 0) -> None:
        if size <= 0:
            raise ValueError(f"window size must be positive, got {size} ms")
        self.size = size
        self.offset = offset % size

    @staticmethod
    def of(size: Time | Duration | int, offset: Time | Duration | int = 0) -> "TumblingEventTimeWindows":
        return TumblingEventTimeWindows(_ms(size), _ms(offset))

    def assign_windows(self, element: Any, timestamp: int) -> list[TimeWindow]:
        start = TimeWindow.get_window_start_with_offset(timestamp, self.offset, self.size)
        return [TimeWindow(start, start + self.size)]

    def __repr__(self) -> str:  # PyFlink's form, shown in the execution plan
        return f"{type(self).__name__}({self.size}, {self.offset})"


class TumblingProcessingTimeWindows(TumblingEventTimeWindows):
    is_event_time = False

    @staticmethod
    def of(size: Time | Duration | int, offset: Time | Duration | int = 0) -> "TumblingProcessingTimeWindows":
        return TumblingProcessingTimeWindows(_ms(size), _ms(offset))


class SlidingEventTimeWindows(WindowAssigner):
    def __init__(self, size: int, slide: int, offset: int = 0) -> None:
        if size <= 0 or slide <= 0:
            raise ValueError(f"window size and slide must be positive, got {size} and {slide} ms")
        self.size = size
        self.slide = slide
        self.offset = offset % slide

    @staticmethod
    def of(size: Time | Duration | int, slide: Time | Duration | int, offset: Time | Duration | int = 0) -> "SlidingEventTimeWindows":
        return SlidingEventTimeWindows(_ms(size), _ms(slide), _ms(offset))

    def assign_windows(self, element: Any, timestamp: int) -> list[TimeWindow]:
        last_start = TimeWindow.get_window_start_with_offset(timestamp, self.offset, self.slide)
        windows = []
        start = last_start
        while start > timestamp - self.size:
            windows.append(TimeWindow(start, start + self.size))
            start -= self.slide
        return windows

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.slide}, {self.offset})"


class SlidingProcessingTimeWindows(SlidingEventTimeWindows):
    is_event_time = False

    @staticmethod
    def of(size: Time | Duration | int, slide: Time | Duration | int, offset: Time | Duration | int = 0) -> "SlidingProcessingTimeWindows":
        return SlidingProcessingTimeWindows(_ms(size), _ms(slide), _ms(offset))


class EventTimeSessionWindows(MergingWindowAssigner):

    def __init__(self, gap: int | None = None, gap_extractor: Callable[[Any], int] | None = None) -> None:
        if gap is not None and gap <= 0:
            raise ValueError(f"session gap must be positive, got {gap} ms")
        self.gap = gap
        self.gap_extractor = gap_extractor

    @classmethod
    def with_gap(cls, size: Time | Duration | int) -> "EventTimeSessionWindows":
        return cls(_ms(size))

    @classmethod
    def with_dynamic_gap(cls, extractor: Any) -> "EventTimeSessionWindows":
        if cls.is_event_time:
            return DynamicEventTimeSessionWindows(extractor)
        return DynamicProcessingTimeSessionWindows(extractor)

    def assign_windows(self, element: Any, timestamp: int) -> list[TimeWindow]:
        gap = self.gap if self.gap_extractor is None else int(self.gap_extractor(element))
        if gap <= 0:
            raise ValueError(f"dynamic session gap must be positive, got {gap} ms for {element!r}")
        return [TimeWindow(timestamp, timestamp + gap)]

    def merge_windows(self, windows: list[TimeWindow]) -> list[tuple[TimeWindow, list[TimeWindow]]]:
        return merge_time_windows(windows)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.gap if self.gap_extractor is None else self.gap_extractor})"


class ProcessingTimeSessionWindows(EventTimeSessionWindows):
    is_event_time = False


class DynamicEventTimeSessionWindows(EventTimeSessionWindows):
    """Event-time sessions whose gap a ``SessionWindowTimeGapExtractor`` gives per element."""

    def __init__(self, gap_extractor: Any) -> None:
        fn = gap_extractor.extract if hasattr(gap_extractor, "extract") else gap_extractor
        if not callable(fn):
            raise TypeError("with_dynamic_gap expects a SessionWindowTimeGapExtractor or a callable")
        super().__init__(None, fn)

    @classmethod
    def with_dynamic_gap(cls, extractor: Any) -> "DynamicEventTimeSessionWindows":
        return cls(extractor)


class DynamicProcessingTimeSessionWindows(DynamicEventTimeSessionWindows):
    is_event_time = False


class GlobalWindows(WindowAssigner):
    """One window per key that never fires by time: count windows use it with a CountTrigger."""

    is_event_time = False

    @staticmethod
    def create() -> "GlobalWindows":
        return GlobalWindows()

    def assign_windows(self, element: Any, timestamp: int) -> list[GlobalWindow]:
        return [GlobalWindow()]

    def get_default_trigger(self) -> Trigger:
        from millstream.engine.windowing.triggers import NeverTrigger

        return NeverTrigger()

    def __repr__(self) -> str:
        return "GlobalWindows()"


class CountTumblingWindowAssigner(WindowAssigner):
    """PyFlink's tumbling count windows (``count_window(size)``): a key's n-th element (from 0) goes
    to ``CountWindow(n // size)``, which fires when it holds ``size`` elements (what a window
    function sees as its window). The window operators keep the per-key count and ask
    ``windows_for_count``, as for sliding count windows."""

    is_event_time = False
    counts_elements = True
    pyflink_default_trigger = "CountTrigger"  # the plan's name for it (ours purges, see below)

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError(f"count window size must be positive, got {size}")
        self.size = size

    @staticmethod
    def of(window_size: int) -> "CountTumblingWindowAssigner":
        return CountTumblingWindowAssigner(window_size)

    def windows_for_count(self, n: int) -> list[CountWindow]:
        return [CountWindow(n // self.size)]

    def assign_windows(self, element: Any, timestamp: int) -> list[Any]:
        raise TypeError("CountTumblingWindowAssigner places elements by their per-key count (windows_for_count)")

    def get_window_serializer(self) -> Any:
        from millstream.engine.windowing.windows import CountWindowSerializer

        return CountWindowSerializer()

    def get_default_trigger(self) -> Trigger:
        from millstream.engine.windowing.triggers import PurgingTrigger

        # PyFlink's is a bare CountTrigger; a full count window gets no further element, so purging
        # on the firing changes no result and frees the window at once.
        return PurgingTrigger.of(CountTrigger.of(self.size))

    def __repr__(self) -> str:
        return f"CountTumblingWindowAssigner({self.size})"


class CountSlidingWindowAssigner(WindowAssigner):
    """PyFlink's sliding count windows (``KeyedStream.count_window(size, slide)``): a key's n-th
    element (from 0) belongs to every ``CountWindow(i)`` whose elements ``i*slide .. i*slide+size-1``
    include n, and each window fires once, when it holds ``size`` elements. (Java Flink's
    countWindow(size, slide) fires every ``slide`` elements instead; PyFlink does not.)

    The window operators keep the per-key count and ask ``windows_for_count``; ``counts_elements``
    tells them to."""

    is_event_time = False
    counts_elements = True
    pyflink_default_trigger = "CountTrigger"

    def __init__(self, size: int, slide: int) -> None:
        if size <= 0 or slide <= 0:
            raise ValueError(f"count window size and slide must be positive, got {size} and {slide}")
        self.size = size
        self.slide = slide

    @staticmethod
    def of(window_size: int, window_slide: int) -> "CountSlidingWindowAssigner":
        return CountSlidingWindowAssigner(window_size, window_slide)

    def windows_for_count(self, n: int) -> list[CountWindow]:
        """The windows of a key's n-th element, newest first (PyFlink's order)."""
        last = n // self.slide
        first = max(0, (n - self.size) // self.slide + 1)
        return [CountWindow(i) for i in range(last, first - 1, -1)]

    def assign_windows(self, element: Any, timestamp: int) -> list[Any]:
        raise TypeError("CountSlidingWindowAssigner places elements by their per-key count (windows_for_count)")

    def get_default_trigger(self) -> Trigger:
        from millstream.engine.windowing.triggers import PurgingTrigger

        # A count window receives no element after its size-th, so purging on the firing changes no
        # result and frees the window at once.
        return PurgingTrigger.of(CountTrigger.of(self.size))

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self.size}, {self.slide})"
