"""Timers of a KeyedProcessFunction in a BATCH run: Flink's BatchExecutionInternalTimeService.

Records reach the function sorted by key, so one key is live at a time.
While its records are processed the watermark is at its minimum; when the
key's input ends the watermark jumps to the maximum, and every event-time
timer of the key fires in timestamp order, then every processing-time timer.
Timers registered while firing are ignored (the service is quiesced, which
also rules out endless timer loops); deleting one still takes effect.
"""
from __future__ import annotations

import time
from typing import Callable, Iterator

from millstream.engine.datastream.functions import TimeDomain, TimerService
from millstream.engine.runtime.timers import InternalTimerService
from millstream.engine.runtime.watermarks import MAX_WATERMARK, MIN_WATERMARK

_KEY = None  # one key at a time: the queues need no key


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class BatchTimerService(TimerService):
    def __init__(self, clock: Callable[[], int] = _wall_clock_ms) -> None:
        self.timers = InternalTimerService(clock)
        self.clock = clock
        self.watermark = MIN_WATERMARK

    @property
    def quiesced(self) -> bool:
        return self.watermark == MAX_WATERMARK

    def current_processing_time(self) -> int:
        return self.clock()

    def current_watermark(self) -> int:
        return self.watermark

    def register_event_time_timer(self, timestamp: int) -> None:
        if not self.quiesced:
            self.timers.register_event_time_timer(_KEY, timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        if not self.quiesced:
            self.timers.register_processing_time_timer(_KEY, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self.timers.delete_event_time_timer(_KEY, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self.timers.delete_processing_time_timer(_KEY, timestamp)

    def end_of_key(self) -> Iterator[tuple[int, TimeDomain]]:
        """The key's timers, one at a time so that on_timer may still delete the next ones."""
        self.watermark = MAX_WATERMARK
        try:
            for queue, domain in (
                (self.timers.event, TimeDomain.EVENT_TIME),
                (self.timers.processing, TimeDomain.PROCESSING_TIME),
            ):
                while (ts := queue.peek()) is not None:
                    queue.pop_until(ts)  # exactly this timer: a timestamp is registered once per key
                    yield ts, domain
        finally:
            self.watermark = MIN_WATERMARK
            self.timers.event.pop_until(MAX_WATERMARK)  # left over if the caller stopped early
            self.timers.processing.pop_until(MAX_WATERMARK)
