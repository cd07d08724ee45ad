"""``WatermarkStrategy``: how a source stamps records and derives watermarks.

The strategy is a pure description; ``millstream.engine.runtime.watermarks`` turns it
into a generator at run time.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from millstream.engine.common.time import Duration


class TimestampAssigner:
    """Extracts an event timestamp (epoch ms) from a record."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        raise NotImplementedError


@dataclass(frozen=True)
class WatermarkStrategy:
    """Which watermarks to emit: none, monotonous or bounded out-of-orderness."""

    kind: str = "none"  # "none" | "monotonous" | "bounded"
    max_out_of_orderness_ms: int = 0
    idleness_ms: int | None = None
    timestamp_assigner: TimestampAssigner | Callable[[Any, int], int] | None = None
    # with_watermark_alignment(group, max drift ms, update interval ms): recorded; sources are not paused.
    alignment: tuple[str, int, int] | None = None

    @staticmethod
    def no_watermarks() -> "WatermarkStrategy":
        return WatermarkStrategy("none")

    @staticmethod
    def for_monotonous_timestamps() -> "WatermarkStrategy":
        return WatermarkStrategy("monotonous")

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> "WatermarkStrategy":
        return WatermarkStrategy("bounded", max_out_of_orderness.to_milliseconds())

    def with_timestamp_assigner(self, assigner: Any) -> "WatermarkStrategy":
        return replace(self, timestamp_assigner=assigner)

    def with_idleness(self, idle_timeout: Duration) -> "WatermarkStrategy":
        return replace(self, idleness_ms=idle_timeout.to_milliseconds())

    def with_watermark_alignment(
        self, watermark_group: str, max_allowed_watermark_drift: Duration, update_interval: Duration | None = None
    ) -> "WatermarkStrategy":
        """Accepted and recorded: Millstream does not pause sources that run ahead of their group."""
        interval = update_interval.to_milliseconds() if update_interval is not None else 1000
        return replace(self, alignment=(watermark_group, max_allowed_watermark_drift.to_milliseconds(), interval))

    def extract_timestamp_fn(self) -> Callable[[Any, int], int] | None:
        """The assigner as a plain two-argument callable, or None."""
        a = self.timestamp_assigner
        if a is None:
            return None
        if isinstance(a, TimestampAssigner):
            return a.extract_timestamp
        return a


from millstream.engine.compat.unsupported import declare_unsupported  # noqa: E402 (placeholders defined last)

declare_unsupported(
    globals(),
    ["AssignerWithPeriodicWatermarksWrapper"],
    why="it wraps Java's legacy AssignerWithPeriodicWatermarks",
    instead="WatermarkStrategy.for_bounded_out_of_orderness(...).with_timestamp_assigner(...)",
)
