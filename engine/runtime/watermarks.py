"""Watermarks: generators at the source and the valve that combines input channels.

Pure logic, no I/O. A task's watermark is the minimum over its active input
channels; idle channels are left out; the combined watermark never goes back.
"""
from __future__ import annotations

from typing import Any, Callable

MIN_WATERMARK = -(2**63)
# The timestamp PyFlink's process functions see for a record that has none (StreamRecord's Long.MIN_VALUE).
NO_TIMESTAMP = MIN_WATERMARK
MAX_WATERMARK = 2**63 - 1


class WatermarkGenerator:
    """Flink's BoundedOutOfOrderness generator; ``bound=0`` gives monotonous timestamps."""

    def __init__(self, out_of_orderness_ms: int) -> None:
        self.bound = out_of_orderness_ms
        # Start low enough that the first watermark is below any real timestamp.
        self.max_ts = MIN_WATERMARK + out_of_orderness_ms + 1

    def on_event(self, ts: int) -> None:
        if ts > self.max_ts:
            self.max_ts = ts

    def current(self) -> int:
        return self.max_ts - self.bound - 1


class TimestampExtractor:
    """Calls the user's assigner and insists on integer epoch milliseconds."""

    def __init__(self, fn: Callable[[Any, int], int], operator_name: str) -> None:
        self.fn = fn
        self.operator_name = operator_name

    def extract(self, values: list[Any], previous: list[int] | None) -> list[int]:
        fn = self.fn
        if previous is None:
            out = [fn(v, MIN_WATERMARK) for v in values]
        else:
            out = [fn(v, p) for v, p in zip(values, previous)]
        # The check runs in C for the usual all-int batch; only a bad batch is walked in Python.
        if not out or set(map(type, out)) == {int}:
            return out
        for ts, v in zip(out, values):
            if type(ts) is not int:
                if isinstance(ts, bool) or not isinstance(ts, int):
                    raise TypeError(
                        f"the timestamp assigner of '{self.operator_name}' returned {ts!r} "
                        f"({type(ts).__name__}) for {v!r}; timestamps must be int epoch milliseconds"
                    )
        return out


class StatusWatermarkValve:
    """Combines per-channel watermarks and idleness into the task's input watermark."""

    def __init__(self, channels: int) -> None:
        self.watermarks = [MIN_WATERMARK] * channels
        self.idle = [False] * channels
        self.ended = [False] * channels
        self.current = MIN_WATERMARK

    def _combine(self) -> int | None:
        live = [wm for wm, idle, ended in zip(self.watermarks, self.idle, self.ended) if not idle and not ended]
        if not live:
            if all(self.ended):
                candidate = MAX_WATERMARK
            else:
                # Every remaining channel is idle: Flink releases the highest watermark any of them reached.
                candidate = max(wm for wm, ended in zip(self.watermarks, self.ended) if not ended)
        else:
            candidate = min(live)
        if candidate > self.current:
            self.current = candidate
            return candidate
        return None

    def input_watermark(self, channel: int, watermark: int) -> int | None:
        """Returns the new combined watermark if it advanced."""
        if watermark > self.watermarks[channel]:
            self.watermarks[channel] = watermark
        self.idle[channel] = False
        return self._combine()

    def input_idle(self, channel: int, idle: bool) -> int | None:
        self.idle[channel] = idle
        return self._combine()

    def end_of_partition(self, channel: int) -> int | None:
        self.ended[channel] = True
        return self._combine()

    def all_idle(self) -> bool:
        return all(i or e for i, e in zip(self.idle, self.ended))
