"""Window types: ``TimeWindow`` [start, end) and ``CountWindow``/``GlobalWindow``, all ``Window``s."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

MAX_TIMESTAMP = 2**63 - 1


class Window(ABC):
    """A group of elements; it has a last timestamp, after which event time may clean it up."""

    __slots__ = ()

    @abstractmethod
    def max_timestamp(self) -> int: ...


@dataclass(frozen=True, order=True)
class TimeWindow(Window):
    start: int
    end: int

    def max_timestamp(self) -> int:
        return self.end - 1

    def intersects(self, other: "TimeWindow") -> bool:
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: "TimeWindow") -> "TimeWindow":
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def merge_windows(windows: list["TimeWindow"], callback: Any) -> None:
        """PyFlink's helper for custom merging assigners: overlapping windows fuse into their cover,
        and ``callback.merge(members, cover)`` is told of every group of more than one."""
        for cover, members in merge_time_windows(list(windows)):
            if len(members) > 1:
                callback.merge(members, cover)

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Flink's rule, correct for negative timestamps too."""
        return timestamp - (timestamp - offset + window_size) % window_size


@dataclass(frozen=True, order=True)
class GlobalWindow(Window):
    """The single window of count windows; it never ends by time."""

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP

    @staticmethod
    def get() -> "GlobalWindow":
        return GlobalWindow()


# PyFlink calls the count-window type CountWindow.
@dataclass(frozen=True, order=True)
class CountWindow(Window):
    id: int = 0

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP


def merge_time_windows(windows: list[TimeWindow]) -> list[tuple[TimeWindow, list[TimeWindow]]]:
    """Flink's TimeWindow.mergeWindows: overlapping windows fuse into their cover."""
    merged: list[tuple[TimeWindow, list[TimeWindow]]] = []
    for w in sorted(windows):
        if merged and merged[-1][0].intersects(w):
            cover, members = merged[-1]
            merged[-1] = (cover.cover(w), [*members, w])
        else:
            merged.append((w, [w]))
    return merged


class _WindowSerializer:
    """PyFlink's custom assigners name a serializer for their windows; Millstream pickles windows,
    so these are markers (returned from ``get_window_serializer``) whose methods pickle too."""

    def serialize(self, element: Any, stream: Any) -> None:
        import pickle

        stream.write(pickle.dumps(element))

    def deserialize(self, stream: Any) -> Any:
        import pickle

        return pickle.load(stream)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self).__name__)


class TimeWindowSerializer(_WindowSerializer):
    pass


class CountWindowSerializer(_WindowSerializer):
    pass


class GlobalWindowSerializer(_WindowSerializer):
    pass
