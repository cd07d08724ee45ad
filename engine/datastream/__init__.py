"""Millstream's equivalent of ``pyflink.datastream``."""
from engine.datastream.data_stream import DataStream, DataStreamSink, KeyedStream
from engine.datastream.execution_mode import RuntimeExecutionMode
from engine.checkpoint.config import CheckpointConfig, CheckpointingMode, ExternalizedCheckpointRetention
from engine.datastream.connected_streams import BroadcastConnectedStream, BroadcastStream, ConnectedStreams
from engine.datastream.functions import (
    AggregateFunction,
    BroadcastProcessFunction,
    CheckpointedFunction,
    CheckpointListener,
    CoProcessFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
    ProcessWindowFunction,
    SinkFunction,
    TimeDomain,
    TimerService,
    WindowFunction,
)
from engine.datastream.output_tag import OutputTag
from engine.datastream.windowed_stream import WindowedStream
from engine.datastream.connectors.source_function import SourceFunction
from engine.datastream.stream_execution_environment import StreamExecutionEnvironment

__all__ = [
    "CheckpointConfig",
    "CheckpointingMode",
    "ExternalizedCheckpointRetention",
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "CheckpointListener",
    "CheckpointedFunction",
    "CoProcessFunction",
    "ConnectedStreams",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "AggregateFunction",
    "CoFlatMapFunction",
    "CoMapFunction",
    "OutputTag",
    "ProcessWindowFunction",
    "TimeDomain",
    "WindowFunction",
    "WindowedStream",
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
