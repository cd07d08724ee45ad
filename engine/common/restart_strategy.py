"""``RestartStrategies`` (``pyflink.common``): how a failed job is restarted.

Pure descriptions that travel in the job config; the JobMaster turns them into
a ``RestartBackoffTimeStrategy`` (engine.executiongraph.restart_backoff).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class RestartStrategyConfiguration:
    type: str  # "none" | "fixed-delay" | "failure-rate"
    attempts: int = 0
    delay_ms: int = 0
    max_failures_per_interval: int = 0
    failure_interval_ms: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __eq__(self, other: object) -> bool:
        # The PyFlink-named subclasses only add getters: equal settings are equal configurations.
        return isinstance(other, RestartStrategyConfiguration) and self.to_dict() == other.to_dict()

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "RestartStrategyConfiguration":
        cls = _BY_TYPE.get(d.get("type", ""), RestartStrategyConfiguration)
        return cls(**d)

    def describe(self) -> str:
        if self.type == "fixed-delay":
            return f"Restart with fixed delay ({self.delay_ms} ms). #{self.attempts} restart attempts."
        if self.type == "failure-rate":
            return (
                f"Failure rate restart with maximum of {self.max_failures_per_interval} failures within interval "
                f"{self.failure_interval_ms} ms and fixed delay {self.delay_ms} ms."
            )
        return "Restart deactivated."


def _ms(t: Any) -> int:
    if isinstance(t, int):
        return t
    return int(t.to_milliseconds())


class _NoRestart(RestartStrategyConfiguration):
    pass


class _FixedDelay(RestartStrategyConfiguration):
    def get_restart_attempts(self) -> int:
        return self.attempts

    def get_delay_between_attempts_interval(self) -> Any:
        from millstream.engine.common.time import Duration

        return Duration.of_millis(self.delay_ms)


class _FailureRate(RestartStrategyConfiguration):
    def get_max_failure_rate(self) -> int:
        return self.max_failures_per_interval

    def get_failure_interval(self) -> Any:
        from millstream.engine.common.time import Duration

        return Duration.of_millis(self.failure_interval_ms)

    def get_delay_between_attempts_interval(self) -> Any:
        from millstream.engine.common.time import Duration

        return Duration.of_millis(self.delay_ms)


class _Fallback(RestartStrategyConfiguration):
    pass


RestartStrategyConfiguration.get_description = RestartStrategyConfiguration.describe  # PyFlink's name
_BY_TYPE: dict[str, type[RestartStrategyConfiguration]] = {
    "none": _NoRestart,
    "fixed-delay": _FixedDelay,
    "failure-rate": _FailureRate,
    "fallback": _Fallback,
}


class RestartStrategies:
    # PyFlink's configuration classes, for isinstance checks and their getters.
    NoRestartStrategyConfiguration = _NoRestart
    FixedDelayRestartStrategyConfiguration = _FixedDelay
    FailureRateRestartStrategyConfiguration = _FailureRate
    FallbackRestartStrategyConfiguration = _Fallback

    @staticmethod
    def no_restart() -> RestartStrategyConfiguration:
        return _NoRestart("none")

    @staticmethod
    def fixed_delay_restart(restart_attempts: int, delay_between_attempts: Any) -> RestartStrategyConfiguration:
        if restart_attempts < 0:
            raise ValueError(f"restart attempts must not be negative, got {restart_attempts}")
        return _FixedDelay("fixed-delay", attempts=restart_attempts, delay_ms=_ms(delay_between_attempts))

    @staticmethod
    def failure_rate_restart(
        failure_rate: int, failure_interval: Any, delay_interval: Any
    ) -> RestartStrategyConfiguration:
        return _FailureRate(
            "failure-rate",
            delay_ms=_ms(delay_interval),
            max_failures_per_interval=failure_rate,
            failure_interval_ms=_ms(failure_interval),
        )

    @staticmethod
    def fall_back_restart() -> RestartStrategyConfiguration:
        return _Fallback("fallback")
