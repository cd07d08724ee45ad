"""Restart decisions (Flink's RestartBackoffTimeStrategy): may the job restart, and after what delay. Pure."""
from __future__ import annotations

from collections import deque
from typing import Any

from millstream.engine.common.restart_strategy import RestartStrategyConfiguration

# Flink's default when checkpointing is on and no strategy is set: restart (practically) forever, 1 s apart.
DEFAULT_WITH_CHECKPOINTING = RestartStrategyConfiguration("fixed-delay", attempts=2**31 - 1, delay_ms=1000)


class RestartBackoffTimeStrategy:
    def __init__(self, config: RestartStrategyConfiguration) -> None:
        self.config = config
        self.restarts = 0
        self.failures: deque[int] = deque()

    @staticmethod
    def from_job_config(job_config: dict[str, Any]) -> "RestartBackoffTimeStrategy":
        raw = job_config.get("restart-strategy")
        if raw:
            config = RestartStrategyConfiguration.from_dict(raw)
        else:
            config = RestartStrategyConfiguration("fallback")
        if config.type == "fallback":
            checkpointing = (job_config.get("execution.checkpointing") or {}).get("interval_ms", -1) != -1
            config = DEFAULT_WITH_CHECKPOINTING if checkpointing else RestartStrategyConfiguration("none")
        return RestartBackoffTimeStrategy(config)

    def notify_failure(self, now_ms: int) -> None:
        self.failures.append(now_ms)

    def can_restart(self, now_ms: int) -> bool:
        c = self.config
        if c.type == "fixed-delay":
            return self.restarts < c.attempts
        if c.type == "failure-rate":
            while self.failures and self.failures[0] <= now_ms - c.failure_interval_ms:
                self.failures.popleft()
            return len(self.failures) <= c.max_failures_per_interval
        return False

    def backoff_ms(self) -> int:
        return self.config.delay_ms

    def on_restart(self) -> None:
        self.restarts += 1
