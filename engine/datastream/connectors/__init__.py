"""Sources and sinks (``pyflink.datastream.connectors``)."""
from engine.datastream.connectors.base import DeliveryGuarantee
from engine.datastream.connectors.source import Source, SourceReader
from engine.datastream.connectors.sink import Committer, Sink, SinkWriter
from engine.datastream.connectors.number_seq import NumberSequenceSource
from engine.datastream.connectors.datagen import DataGeneratorSource
# PyFlink also offers the file connectors here (their home is ``connectors.file_system``).
from engine.datastream.connectors.file_system import (
    BucketAssigner,
    FileSink,
    FileSource,
    FileSourceBuilder,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)

__all__ = [
    "BucketAssigner",
    "Committer",
    "DataGeneratorSource",
    "DeliveryGuarantee",
    "FileSink",
    "FileSource",
    "FileSourceBuilder",
    "NumberSequenceSource",
    "OutputFileConfig",
    "RollingPolicy",
    "Sink",
    "SinkWriter",
    "Source",
    "SourceReader",
    "StreamFormat",
]
