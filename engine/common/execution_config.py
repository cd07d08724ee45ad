"""``ExecutionConfig``: per-job settings, what ``env.get_config()`` returns (``pyflink.common.execution_config``).

Settings that mean something in Millstream take effect: parallelism and max
parallelism are the environment's own, global job parameters reach every
``RuntimeContext.get_job_parameter``, the auto-watermark interval drives the
watermark operators (a chosen interval makes them strictly periodic; 0 disables
periodic watermarks, as in Flink; by default one also follows every batch), and turning
auto-generated uids off makes a job without explicit uids fail to build, as
Flink does; a latency tracking interval (``set_latency_tracking_interval``) turns latency
markers on for the job (engine/runtime/latency_markers.py; -1 leaves the cluster's
``metrics.latency.interval``, 0 turns them off). The rest (Kryo, Avro, closure cleaner,
object reuse, snapshot compression, cancellation intervals) concern the JVM and are
recorded and returned, not acted on.
"""
from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ExecutionConfig"]

DEFAULT_AUTO_WATERMARK_INTERVAL_MS = 200


class _Environment(Protocol):
    """The part of StreamExecutionEnvironment the config reads and writes (no import: no cycle)."""

    _job_parameters: dict[str, str]

    def set_parallelism(self, parallelism: int) -> Any: ...

    def get_parallelism(self) -> int: ...

    def set_max_parallelism(self, max_parallelism: int) -> Any: ...

    def get_max_parallelism(self) -> int: ...


class ExecutionConfig:
    PARALLELISM_DEFAULT = -1  # Flink's markers: "use the environment's" and "not known yet"
    PARALLELISM_UNKNOWN = -2

    def __init__(self, env: _Environment) -> None:
        self._env = env
        self._auto_watermark_interval = DEFAULT_AUTO_WATERMARK_INTERVAL_MS
        self._auto_watermark_interval_set = False
        self._auto_generated_uids = True
        self._flags: dict[str, Any] = {
            "closure_cleaner": True,
            "latency_tracking_interval": -1,
            "task_cancellation_interval": 30000,
            "task_cancellation_timeout": 180000,
            "force_kryo": False,
            "generic_types": True,
            "force_avro": False,
            "object_reuse": False,
            "snapshot_compression": False,
        }

    # -- settings with an effect -----------------------------------------------
    def set_auto_watermark_interval(self, interval: int) -> "ExecutionConfig":
        if interval < 0:
            raise ValueError(f"the auto-watermark interval must not be negative, got {interval}")
        self._auto_watermark_interval = int(interval)
        self._auto_watermark_interval_set = True
        return self

    def get_auto_watermark_interval(self) -> int:
        return self._auto_watermark_interval

    def get_parallelism(self) -> int:
        return self._env.get_parallelism()

    def set_parallelism(self, parallelism: int) -> "ExecutionConfig":
        self._env.set_parallelism(parallelism)
        return self

    def get_max_parallelism(self) -> int:
        return self._env.get_max_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> "ExecutionConfig":
        self._env.set_max_parallelism(max_parallelism)
        return self

    def get_global_job_parameters(self) -> dict[str, str]:
        return dict(self._env._job_parameters)

    def set_global_job_parameters(self, global_job_parameters_dict: dict[str, Any]) -> "ExecutionConfig":
        # Replaces the whole set, as Flink does; values are strings there too.
        self._env._job_parameters.clear()
        self._env._job_parameters.update({str(k): str(v) for k, v in global_job_parameters_dict.items()})
        return self

    def enable_auto_generated_uids(self) -> "ExecutionConfig":
        self._auto_generated_uids = True
        return self

    def disable_auto_generated_uids(self) -> "ExecutionConfig":
        """From now on every operator needs ``uid(...)``, or the job fails to build."""
        self._auto_generated_uids = False
        return self

    def has_auto_generated_uids_enabled(self) -> bool:
        return self._auto_generated_uids

    # -- recorded only (JVM concerns) ------------------------------------------
    def _set(self, name: str, value: Any) -> "ExecutionConfig":
        self._flags[name] = value
        return self

    def enable_closure_cleaner(self) -> "ExecutionConfig":
        return self._set("closure_cleaner", True)

    def disable_closure_cleaner(self) -> "ExecutionConfig":
        return self._set("closure_cleaner", False)

    def is_closure_cleaner_enabled(self) -> bool:
        return self._flags["closure_cleaner"]

    def set_latency_tracking_interval(self, interval: int) -> "ExecutionConfig":
        return self._set("latency_tracking_interval", int(interval))

    def get_latency_tracking_interval(self) -> int:
        return self._flags["latency_tracking_interval"]

    def get_task_cancellation_interval(self) -> int:
        return self._flags["task_cancellation_interval"]

    def set_task_cancellation_interval(self, interval: int) -> "ExecutionConfig":
        return self._set("task_cancellation_interval", int(interval))

    def get_task_cancellation_timeout(self) -> int:
        return self._flags["task_cancellation_timeout"]

    def set_task_cancellation_timeout(self, timeout: int) -> "ExecutionConfig":
        if timeout < 0:
            raise ValueError("the task cancellation timeout must not be negative")
        return self._set("task_cancellation_timeout", int(timeout))

    def enable_force_kryo(self) -> "ExecutionConfig":
        return self._set("force_kryo", True)

    def disable_force_kryo(self) -> "ExecutionConfig":
        return self._set("force_kryo", False)

    def is_force_kryo_enabled(self) -> bool:
        return self._flags["force_kryo"]

    def enable_generic_types(self) -> "ExecutionConfig":
        return self._set("generic_types", True)

    def disable_generic_types(self) -> "ExecutionConfig":
        return self._set("generic_types", False)

    def has_generic_types_disabled(self) -> bool:
        return not self._flags["generic_types"]

    def enable_force_avro(self) -> "ExecutionConfig":
        return self._set("force_avro", True)

    def disable_force_avro(self) -> "ExecutionConfig":
        return self._set("force_avro", False)

    def is_force_avro_enabled(self) -> bool:
        return self._flags["force_avro"]

    def enable_object_reuse(self) -> "ExecutionConfig":
        # Records cross operators as Python objects or msgpack bytes; there is no copy to save.
        return self._set("object_reuse", True)

    def disable_object_reuse(self) -> "ExecutionConfig":
        return self._set("object_reuse", False)

    def is_object_reuse_enabled(self) -> bool:
        return self._flags["object_reuse"]

    def get_default_kryo_serializer_classes(self) -> dict[str, str]:
        return {}

    def get_registered_kryo_types(self) -> list[str]:
        return []

    def get_registered_pojo_types(self) -> list[str]:
        return []

    def is_use_snapshot_compression(self) -> bool:
        return self._flags["snapshot_compression"]

    def set_use_snapshot_compression(self, use_snapshot_compression: bool) -> "ExecutionConfig":
        return self._set("snapshot_compression", bool(use_snapshot_compression))

    def to_job_config(self) -> dict[str, Any]:
        """The job-config entries the runtime reads (Flink's option names)."""
        config: dict[str, Any] = {"pipeline.auto-watermark-interval": self._auto_watermark_interval}
        if self._flags["latency_tracking_interval"] >= 0:  # -1: the cluster's metrics.latency.interval
            config["metrics.latency.interval"] = self._flags["latency_tracking_interval"]
        return config

    def auto_watermark_interval_is_set(self) -> bool:
        """Whether the program chose the interval (then watermarks are strictly periodic)."""
        return self._auto_watermark_interval_set
