"""``Duration`` and ``Time``: the time spans PyFlink programs pass to the API."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Duration:
    """A span of time held in milliseconds, with PyFlink's factory names."""

    millis: int

    @staticmethod
    def of_millis(millis: int) -> "Duration":
        return Duration(int(millis))

    @staticmethod
    def of_seconds(seconds: int) -> "Duration":
        return Duration(int(seconds) * 1000)

    @staticmethod
    def of_minutes(minutes: int) -> "Duration":
        return Duration(int(minutes) * 60_000)

    @staticmethod
    def of_hours(hours: int) -> "Duration":
        return Duration(int(hours) * 3_600_000)

    @staticmethod
    def of_days(days: int) -> "Duration":
        return Duration(int(days) * 86_400_000)

    @staticmethod
    def of_nanos(nanos: int) -> "Duration":
        # Millisecond resolution, like every duration Millstream's runtime takes.
        return Duration(int(nanos) // 1_000_000)

    @staticmethod
    def zero() -> "Duration":
        return Duration(0)

    def to_milliseconds(self) -> int:
        return self.millis


@dataclass(frozen=True)
class Time:
    """PyFlink's older ``Time`` helper, still used by window assigners."""

    millis: int

    @staticmethod
    def milliseconds(n: int) -> "Time":
        return Time(int(n))

    @staticmethod
    def seconds(n: int) -> "Time":
        return Time(int(n) * 1000)

    @staticmethod
    def minutes(n: int) -> "Time":
        return Time(int(n) * 60_000)

    @staticmethod
    def hours(n: int) -> "Time":
        return Time(int(n) * 3_600_000)

    @staticmethod
    def days(n: int) -> "Time":
        return Time(int(n) * 86_400_000)

    def to_milliseconds(self) -> int:
        return self.millis


@dataclass(frozen=True)
class Instant:
    """A point in time as seconds and nanoseconds since the epoch (``pyflink.common.time.Instant``)."""

    seconds: int
    nanos: int = 0

    @staticmethod
    def of_epoch_milli(epoch_milli: int) -> "Instant":
        return Instant(epoch_milli // 1000, (epoch_milli % 1000) * 1_000_000)

    def to_epoch_milli(self) -> int:
        return self.seconds * 1000 + self.nanos // 1_000_000
