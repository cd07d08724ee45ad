"""Millstream's equivalent of ``pyflink.datastream``."""
from engine.datastream.data_stream import DataStream, DataStreamSink, KeyedStream
from engine.datastream.execution_mode import RuntimeExecutionMode
from engine.datastream.functions import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    TimerService,
)
from engine.datastream.connectors.source_function import SourceFunction
from engine.datastream.stream_execution_environment import StreamExecutionEnvironment

__all__ = [
    "DataStream",
    "DataStreamSink",
    "FilterFunction",
    "FlatMapFunction",
    "KeySelector",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "ProcessFunction",
    "ReduceFunction",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SinkFunction",
    "SourceFunction",
    "StreamExecutionEnvironment",
    "TimerService",
]
