"""CheckpointConfig: how often and how a job checkpoints, as PyFlink's ``env.get_checkpoint_config()``.

It travels inside the JobGraph's JSON config (``to_dict``/``from_dict``), and
every setter validates, so a bad value fails at the client, not in the cluster.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from enum import Enum
from typing import Any, Mapping

MINIMAL_CHECKPOINT_TIME_MS = 10  # Flink's CheckpointConfig.MINIMAL_CHECKPOINT_TIME
DEFAULT_TIMEOUT_MS = 10 * 60 * 1000
JOB_CONFIG_KEY = "execution.checkpointing"  # where to_dict() sits inside JobGraph.config
# Boolean job options of the state backend (Flink's CheckpointingOptions.INCREMENTAL_CHECKPOINTS, and
# Millstream's own full-checkpoints-from-changes), read by every task: a job whose value is neither true
# nor false is refused at submission (``graph.validation``), not failed at each deploy.
INCREMENTAL_CHECKPOINTS_KEY = "state.backend.incremental"
FULL_CHECKPOINTS_FROM_CHANGES_KEY = "state.backend.hashmap.full-checkpoints-from-changes"
BOOLEAN_STATE_OPTIONS = (INCREMENTAL_CHECKPOINTS_KEY, FULL_CHECKPOINTS_FROM_CHANGES_KEY)


class InvalidCheckpointConfig(ValueError):
    pass


class CheckpointingMode(str, Enum):
    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"


class ExternalizedCheckpointRetention(str, Enum):
    """What happens to retained checkpoints when the job ends (PyFlink's ExternalizedCheckpointCleanup)."""

    DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
    RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"
    NO_EXTERNALIZED_CHECKPOINTS = "NO_EXTERNALIZED_CHECKPOINTS"

    def is_enabled(self) -> bool:
        return self is not ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS

    def delete_on_cancellation(self) -> bool:
        return self is not ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION


ExternalizedCheckpointCleanup = ExternalizedCheckpointRetention  # PyFlink's older name


@dataclass
class CheckpointConfig:
    interval_ms: int = -1  # -1: checkpointing disabled
    mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    min_pause_ms: int = 0
    max_concurrent: int = 1
    tolerable_failures: int = 0
    retained: int = 1  # Flink's state.checkpoints.num-retained
    externalized: ExternalizedCheckpointRetention = ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS
    storage_dir: str | None = None  # None: no durable checkpoint storage configured

    def __post_init__(self) -> None:
        self.mode = _enum(CheckpointingMode, self.mode, "checkpointing mode")
        self.externalized = _enum(ExternalizedCheckpointRetention, self.externalized, "externalized checkpoint retention")
        self.validate()

    def validate(self) -> None:
        _int("checkpoint interval", self.interval_ms)
        if self.interval_ms != -1 and self.interval_ms < MINIMAL_CHECKPOINT_TIME_MS:
            raise InvalidCheckpointConfig(
                f"checkpoint interval must be -1 (disabled) or at least {MINIMAL_CHECKPOINT_TIME_MS} ms, "
                f"got {self.interval_ms}"
            )
        _int("checkpoint timeout", self.timeout_ms)
        if self.timeout_ms < MINIMAL_CHECKPOINT_TIME_MS:
            raise InvalidCheckpointConfig(
                f"checkpoint timeout must be at least {MINIMAL_CHECKPOINT_TIME_MS} ms, got {self.timeout_ms}"
            )
        for name, value, least in (
            ("minimum pause between checkpoints", self.min_pause_ms, 0),
            ("maximum concurrent checkpoints", self.max_concurrent, 1),
            ("tolerable checkpoint failure number", self.tolerable_failures, 0),
            ("number of retained checkpoints", self.retained, 1),
        ):
            _int(name, value)
            if value < least:
                raise InvalidCheckpointConfig(f"{name} must be at least {least}, got {value}")
        if self.storage_dir is not None and (not isinstance(self.storage_dir, str) or not self.storage_dir.strip()):
            raise InvalidCheckpointConfig(f"checkpoint storage directory must be a non-empty path, got {self.storage_dir!r}")

    # -- PyFlink's CheckpointConfig setters and getters --------------------
    def is_checkpointing_enabled(self) -> bool:
        return self.interval_ms != -1

    def set_checkpoint_interval(self, checkpoint_interval: int) -> "CheckpointConfig":
        return self._set(interval_ms=checkpoint_interval)

    def get_checkpoint_interval(self) -> int:
        return self.interval_ms

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode | str) -> "CheckpointConfig":
        return self._set(mode=_enum(CheckpointingMode, checkpointing_mode, "checkpointing mode"))

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self.mode

    def set_checkpoint_timeout(self, checkpoint_timeout: int) -> "CheckpointConfig":
        return self._set(timeout_ms=checkpoint_timeout)

    def get_checkpoint_timeout(self) -> int:
        return self.timeout_ms

    def set_min_pause_between_checkpoints(self, min_pause_between_checkpoints: int) -> "CheckpointConfig":
        return self._set(min_pause_ms=min_pause_between_checkpoints)

    def get_min_pause_between_checkpoints(self) -> int:
        return self.min_pause_ms

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> "CheckpointConfig":
        return self._set(max_concurrent=max_concurrent_checkpoints)

    def get_max_concurrent_checkpoints(self) -> int:
        return self.max_concurrent

    def set_tolerable_checkpoint_failure_number(self, number: int) -> "CheckpointConfig":
        return self._set(tolerable_failures=number)

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return self.tolerable_failures

    def set_num_retained_checkpoints(self, number: int) -> "CheckpointConfig":
        return self._set(retained=number)

    def get_num_retained_checkpoints(self) -> int:
        return self.retained

    def set_externalized_checkpoint_retention(self, retention: ExternalizedCheckpointRetention | str) -> "CheckpointConfig":
        return self._set(externalized=_enum(ExternalizedCheckpointRetention, retention, "externalized checkpoint retention"))

    set_externalized_checkpoint_cleanup = set_externalized_checkpoint_retention
    enable_externalized_checkpoints = set_externalized_checkpoint_retention

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        return self.externalized

    get_externalized_checkpoint_cleanup = get_externalized_checkpoint_retention

    def is_externalized_checkpoints_enabled(self) -> bool:
        return self.externalized.is_enabled()

    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> "CheckpointConfig":
        path = checkpoint_path[len("file://"):] if checkpoint_path.startswith("file://") else checkpoint_path
        return self._set(storage_dir=path)

    def get_checkpoint_storage_dir(self) -> str | None:
        return self.storage_dir

    def set_checkpoint_storage(self, storage: Any) -> "CheckpointConfig":
        """A ``pyflink.datastream.checkpoint_storage`` object; its directory (None: the default) is used."""
        return self._set(storage_dir=getattr(storage, "directory", None))

    def is_exactly_once(self) -> bool:
        return self.mode is CheckpointingMode.EXACTLY_ONCE

    # -- PyFlink settings without a counterpart: barriers are always aligned in exactly-once mode
    # (at-least-once never blocks), so unaligned checkpoints are accepted and stay off.
    def enable_unaligned_checkpoints(self, enabled: bool = True) -> "CheckpointConfig":
        return self

    def disable_unaligned_checkpoints(self) -> "CheckpointConfig":
        return self

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return False

    def set_force_unaligned_checkpoints(self, force_unaligned_checkpoints: bool = True) -> "CheckpointConfig":
        return self

    def is_force_unaligned_checkpoints(self) -> bool:
        return False

    def set_alignment_timeout(self, alignment_timeout: Any) -> "CheckpointConfig":
        return self

    set_aligned_checkpoint_timeout = set_alignment_timeout

    def get_alignment_timeout(self) -> Any:
        from millstream.engine.common.time import Duration

        return Duration.of_millis(0)

    get_aligned_checkpoint_timeout = get_alignment_timeout

    def set_fail_on_checkpointing_errors(self, fail_on_checkpointing_errors: bool) -> "CheckpointConfig":
        """Flink's older switch: fail on the first failed checkpoint, or tolerate them all."""
        return self._set(tolerable_failures=0 if fail_on_checkpointing_errors else 2**31 - 1)

    def is_fail_on_checkpointing_errors(self) -> bool:
        return self.tolerable_failures == 0

    def _set(self, **changes: Any) -> "CheckpointConfig":
        """Apply ``changes`` only if the result is valid, so a rejected setter leaves the config as it was."""
        candidate = CheckpointConfig(**{**self._fields(), **changes})
        for k, v in candidate._fields().items():
            setattr(self, k, v)
        return self

    def _fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # -- (de)serialisation -------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mode"] = self.mode.value
        d["externalized"] = self.externalized.value
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "CheckpointConfig":
        known = {f.name for f in fields(CheckpointConfig)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InvalidCheckpointConfig(f"unknown checkpoint config keys: {', '.join(unknown)}")
        return CheckpointConfig(**dict(d))

    @staticmethod
    def from_job_config(job_config: Mapping[str, Any]) -> "CheckpointConfig":
        """The config a JobGraph carries: the nested dict under JOB_CONFIG_KEY, then any Flink option keys."""
        cfg = CheckpointConfig.from_dict(job_config.get(JOB_CONFIG_KEY) or {})
        return cfg.apply_flink_options(job_config)

    def apply_flink_options(self, options: Mapping[str, Any]) -> "CheckpointConfig":
        """Apply Flink's option keys (``execution.checkpointing.interval: 10 s`` ...) that are present."""
        changes: dict[str, Any] = {}
        for key, (attr, parse) in _FLINK_OPTIONS.items():
            if key in options and options[key] is not None:
                try:
                    changes[attr] = parse(options[key])
                except ValueError as e:
                    raise InvalidCheckpointConfig(f"option {key}: {e}") from None
        return self._set(**changes) if changes else self


def parse_duration_ms(value: Any) -> int:
    """Flink's duration syntax: ``500``, ``500 ms``, ``10 s``, ``2 min``, ``1 h`` (a bare number is ms)."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        return int(value)
    m = re.fullmatch(r"\s*(-?\d+)\s*([a-zA-Z]*)\s*", str(value))
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS_MS:
        raise ValueError(f"not a duration: {value!r} (use e.g. '500 ms', '10 s', '5 min')")
    return int(m.group(1)) * _UNITS_MS[unit]


_UNITS_MS = {
    "": 1, "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "min": 60_000, "m": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}


def _parse_int(value: Any) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"not an integer: {value!r}") from None


_FLINK_OPTIONS: dict[str, tuple[str, Any]] = {
    "execution.checkpointing.interval": ("interval_ms", parse_duration_ms),
    "execution.checkpointing.mode": ("mode", lambda v: str(v).strip().upper()),
    "execution.checkpointing.timeout": ("timeout_ms", parse_duration_ms),
    "execution.checkpointing.min-pause": ("min_pause_ms", parse_duration_ms),
    "execution.checkpointing.max-concurrent-checkpoints": ("max_concurrent", _parse_int),
    "execution.checkpointing.tolerable-failed-checkpoints": ("tolerable_failures", _parse_int),
    "execution.checkpointing.externalized-checkpoint-retention": ("externalized", lambda v: str(v).strip().upper()),
    "state.checkpoints.num-retained": ("retained", _parse_int),
    "execution.checkpointing.num-retained": ("retained", _parse_int),
    "state.checkpoints.dir": ("storage_dir", lambda v: str(v).removeprefix("file://")),
    "execution.checkpointing.dir": ("storage_dir", lambda v: str(v).removeprefix("file://")),
}


def _int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidCheckpointConfig(f"{name} must be an integer, got {value!r}")


def _enum(cls: type[Enum], value: Any, what: str) -> Any:
    if isinstance(value, cls):
        return value
    try:
        return cls(str(getattr(value, "name", value)))
    except ValueError:
        allowed = ", ".join(m.value for m in cls)  # type: ignore[attr-defined]
        raise InvalidCheckpointConfig(f"{what} must be one of {allowed}, got {value!r}") from None
