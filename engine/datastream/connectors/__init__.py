"""Sources and sinks (``pyflink.datastream.connectors``)."""
from engine.datastream.connectors.source import Source, SourceReader
from engine.datastream.connectors.sink import Committer, Sink, SinkWriter
from engine.datastream.connectors.number_seq import NumberSequenceSource
from engine.datastream.connectors.datagen import DataGeneratorSource

__all__ = [
    "Committer",
    "DataGeneratorSource",
    "NumberSequenceSource",
    "Sink",
    "SinkWriter",
    "Source",
    "SourceReader",
]
