"""Millstream's equivalent of ``pyflink.common``: types, time, rows, configuration."""
from engine.common.configuration import Configuration
from engine.common.job_execution_result import JobExecutionException, JobExecutionResult
from engine.common.restart_strategy import RestartStrategies, RestartStrategyConfiguration
from engine.common.row import Row
from engine.common.serialization import Encoder, SimpleStringSchema
from engine.common.time import Duration, Time
from engine.common.typeinfo import TypeInformation, Types
from engine.common.watermark_strategy import TimestampAssigner, WatermarkStrategy

__all__ = [
    "Configuration",
    "Duration",
    "Encoder",
    "JobExecutionException",
    "JobExecutionResult",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "Row",
    "SimpleStringSchema",
    "Time",
    "TimestampAssigner",
    "TypeInformation",
    "Types",
    "WatermarkStrategy",
]
