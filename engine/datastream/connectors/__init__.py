"""Sources and sinks (``pyflink.datastream.connectors``)."""
from millstream.engine.datastream.connectors.base import DeliveryGuarantee
from millstream.engine.datastream.connectors.source import Source, SourceReader
from millstream.engine.datastream.connectors.sink import Committer, Sink, SinkWriter
from millstream.engine.datastream.connectors.number_seq import NumberSequenceSource
from millstream.engine.datastream.connectors.datagen import DataGeneratorSource
# PyFlink also offers the file connectors here (their home is ``connectors.file_system``).
from millstream.engine.datastream.connectors.file_system import (
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
