"""Evictors remove elements from a window before (or after) its function runs."""
from __future__ import annotations

from typing import Any


class Evictor:
    do_evict_after = False

    def evict(self, elements: list[tuple[Any, int]], window: Any) -> list[tuple[Any, int]]:
        """Return the elements that stay; ``elements`` are (value, timestamp) pairs."""
        return elements


class CountEvictor(Evictor):
    def __init__(self, max_count: int, do_evict_after: bool = False) -> None:
        self.max_count = max_count
        self.do_evict_after = do_evict_after

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> "CountEvictor":
        return CountEvictor(max_count, do_evict_after)

    def evict(self, elements, window):
        if len(elements) <= self.max_count:
            return elements
        return elements[len(elements) - self.max_count :]


class TimeEvictor(Evictor):
    """Keeps elements within ``window_size`` of the newest element's timestamp."""

    def __init__(self, window_size: int, do_evict_after: bool = False) -> None:
        self.window_size = window_size
        self.do_evict_after = do_evict_after

    @staticmethod
    def of(window_size: Any, do_evict_after: bool = False) -> "TimeEvictor":
        size = window_size if isinstance(window_size, int) else window_size.to_milliseconds()
        return TimeEvictor(size, do_evict_after)

    def evict(self, elements, window):
        if not elements:
            return elements
        newest = max(ts for _, ts in elements)
        cut = newest - self.window_size
        return [(v, ts) for v, ts in elements if ts > cut]
