"""Millstream's equivalent of ``pyflink.common``: types, time, rows, configuration."""
from millstream.engine.common.completable_future import CompletableFuture
from millstream.engine.common.config_options import ConfigOption, ConfigOptions
from millstream.engine.common.configuration import Configuration
from millstream.engine.common.execution_config import ExecutionConfig
from millstream.engine.common.input_dependency_constraint import InputDependencyConstraint
from millstream.engine.common.job_client import JobClient
from millstream.engine.common.job_execution_result import JobExecutionException, JobExecutionResult
from millstream.engine.common.job_id import JobID
from millstream.engine.common.job_status import JobStatus
from millstream.engine.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from millstream.engine.common.row import Row
from millstream.engine.common.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    SerializationSchema,
    SimpleStringSchema,
)
from millstream.engine.common.time import Duration, Instant, Time
from millstream.engine.common.typeinfo import TypeInformation, Types
from millstream.engine.common.types import RowKind
from millstream.engine.common.watermark_strategy import (
    AssignerWithPeriodicWatermarksWrapper,
    TimestampAssigner,
    WatermarkStrategy,
)
from millstream.engine.compat.unsupported import declare_unsupported

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
