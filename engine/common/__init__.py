"""Millstream's equivalent of ``pyflink.common``: types, time, rows, configuration."""
from engine.common.completable_future import CompletableFuture
from engine.common.config_options import ConfigOption, ConfigOptions
from engine.common.configuration import Configuration
from engine.common.execution_config import ExecutionConfig
from engine.common.input_dependency_constraint import InputDependencyConstraint
from engine.common.job_client import JobClient
from engine.common.job_execution_result import JobExecutionException, JobExecutionResult
from engine.common.job_id import JobID
from engine.common.job_status import JobStatus
from engine.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from engine.common.row import Row
from engine.common.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    SerializationSchema,
    SimpleStringSchema,
)
from engine.common.time import Duration, Instant, Time
from engine.common.typeinfo import TypeInformation, Types
from engine.common.types import RowKind
from engine.common.watermark_strategy import (
    AssignerWithPeriodicWatermarksWrapper,
    TimestampAssigner,
    WatermarkStrategy,
)
from engine.compat.unsupported import declare_unsupported

declare_unsupported(
    globals(),
    ["TypeSerializer"],
    why="records and state are serialised with msgpack/pickle; custom serializers are not pluggable per type",
    instead="a TypeInformation (Types.*) or no type at all",
)

__all__ = [
    "AssignerWithPeriodicWatermarksWrapper",
    "ByteArraySchema",
    "CompletableFuture",
    "ConfigOption",
    "ConfigOptions",
    "Configuration",
    "DeserializationSchema",
    "Duration",
    "Encoder",
    "ExecutionConfig",
    "Instant",
    "InputDependencyConstraint",
    "JobClient",
    "JobExecutionException",
    "JobExecutionResult",
    "JobID",
    "JobStatus",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "Row",
    "RowKind",
    "SerializationSchema",
    "SimpleStringSchema",
    "Time",
    "TimestampAssigner",
    "TypeInformation",
    "TypeSerializer",
    "Types",
    "WatermarkStrategy",
]
